"""What the compiler asks a tuning database when it builds, and the answer's report.

The compiler does not import ``db``: ``build(mod, target, database=...)`` takes any
object with ``best_trace(workload_key, target)``, which ``db.Database`` has (and a
test double, a dict, or a file of best traces could have). Each PrimFunc of the
module is looked up by its workload key on the target's canonical string; a found
trace is replayed on that function (through the process's replay cache), and a
function without one, or whose trace no longer replays, keeps the schedule it
came with. The report says which is which,
so a build never silently runs untuned or misapplied code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from compiler.codegen.target import LLVMTarget
from compiler.ir.function import IRModule, PrimFunc
from compiler.schedule.errors import ScheduleError
from compiler.schedule.replay import replayed
from compiler.workload_key import workload_key


class TuningLookup(Protocol):
    def best_trace(self, workload_key: str, target: str) -> str | None:
        """The JSON text of the fastest stored trace of the current trace format for
        this workload on this target (a canonical target string), or None."""
        ...


def canonical_target(target: str | LLVMTarget) -> str:
    """The one spelling of a target that records are stored and looked up under:
    ``"llvm"`` becomes ``"llvm -mcpu=<host cpu>"``, so records made on one CPU are
    never applied on another."""
    return str(LLVMTarget.parse(target))


def target_host_kind(target: str | LLVMTarget) -> str:
    """What a target says about the hardware, for people reading the database."""
    parsed = LLVMTarget.parse(target)
    return f"{parsed.cpu}, {parsed.vector_bits}-bit vectors, {parsed.threads} threads"


@dataclass(frozen=True)
class FunctionTuning:
    """What the build did with one function: ``tuned`` when a stored trace was
    replayed on it; otherwise ``reason`` says why not."""

    name: str
    workload_key: str
    tuned: bool
    reason: str


@dataclass(frozen=True)
class TuningReport:
    target: str
    functions: tuple[FunctionTuning, ...]

    @property
    def tuned(self) -> list[str]:
        return [f.name for f in self.functions if f.tuned]

    @property
    def untuned(self) -> list[str]:
        return [f.name for f in self.functions if not f.tuned]

    def __str__(self) -> str:
        lines = [f"tuning database on {self.target}:"]
        for f in self.functions:
            state = "tuned" if f.tuned else "not tuned"
            lines.append(f"  {f.name}: {state} ({f.reason}; workload {f.workload_key[:12]})")
        return "\n".join(lines)


def apply_best(
    mod: IRModule, target: str | LLVMTarget, lookup: TuningLookup
) -> tuple[IRModule, TuningReport]:
    """``mod`` with each function that has a stored best trace replaced by that trace
    replayed on it, and the report of what was done for each function."""
    target_key = canonical_target(target)
    functions: dict[str, PrimFunc] = {}
    outcomes = []
    for name, func in mod.items():
        functions[name], outcome = _apply_one(name, func, target_key, lookup)
        outcomes.append(outcome)
    return IRModule(functions), TuningReport(target_key, tuple(outcomes))


def _apply_one(
    name: str, func: PrimFunc, target: str, lookup: TuningLookup
) -> tuple[PrimFunc, FunctionTuning]:
    key = workload_key(func)
    trace_json = lookup.best_trace(key, target)
    if trace_json is None:
        return func, FunctionTuning(name, key, False, "no stored schedule for this target")
    try:
        program = replayed(func, trace_json, key=key)
    except ScheduleError as err:
        reason = f"the stored schedule does not replay: {err}"
        return func, FunctionTuning(name, key, False, reason)
    return program.func, FunctionTuning(name, key, True, "replayed the best stored schedule")
