"""What the compiler asks a tuning database when it builds, and the answer's report.

The compiler does not import ``db``: ``build(mod, target, database=...)`` takes any
object with ``targets(workload_key)``, ``best_trace(workload_key, target)`` and
``best_seconds(workload_key, target)``, which ``db.Database`` has (and a test double
or a file of best traces could have). Each PrimFunc of the module is looked up by
its workload key: on the target's canonical string, else on a stored target of the
same CPU, cores and triple whose code-generation features this target has all of
(an older spelling of the same machine). A schedule tuned where features were
available that this target lacks (AVX-512 on an AVX2 machine) is never applied. A
found trace is replayed on the function (through the process's replay cache); a
function without one, or whose trace no longer replays, keeps the schedule it came
with. The
report says which is which and why, so a build never silently runs untuned or
misapplied code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from compiler.ir.function import IRModule, PrimFunc
from compiler.schedule.errors import ScheduleError
from compiler.target.cuda import CudaTarget
from compiler.target.errors import TargetError
from compiler.target.llvm import LLVMTarget
from compiler.target.parse import Target, parse_target
from compiler.tuned.replay import replayed
from compiler.workload.key import workload_key


class TuningLookup(Protocol):
    def targets(self, workload_key: str) -> list[str]:
        """The target strings this workload has records on."""
        ...

    def best_trace(self, workload_key: str, target: str) -> str | None:
        """The JSON text of the fastest stored trace of the current trace format for
        this workload on this target (a canonical target string), or None."""
        ...

    def best_seconds(self, workload_key: str, target: str) -> float | None:
        """The run time of that trace, in seconds, or None."""
        ...


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
    mod: IRModule, target: str | Target, lookup: TuningLookup
) -> tuple[IRModule, TuningReport]:
    """``mod`` with each function that has a stored best trace replaced by that trace
    replayed on it, and the report of what was done for each function."""
    parsed = parse_target(target)
    functions: dict[str, PrimFunc] = {}
    outcomes = []
    for name, func in mod.items():
        functions[name], outcome = _apply_one(name, func, parsed, lookup)
        outcomes.append(outcome)
    return IRModule(functions), TuningReport(str(parsed), tuple(outcomes))


def _apply_one(
    name: str, func: PrimFunc, target: Target, lookup: TuningLookup
) -> tuple[PrimFunc, FunctionTuning]:
    key = workload_key(func)
    stored, reason = _stored_target(key, target, lookup)
    trace_json = None if stored is None else lookup.best_trace(key, stored)
    if trace_json is None:
        return func, FunctionTuning(name, key, False, reason)
    try:
        program = replayed(func, trace_json, key=key)
    except ScheduleError as err:
        reason = f"the stored schedule does not replay: {err}"
        return func, FunctionTuning(name, key, False, reason)
    return program.func, FunctionTuning(name, key, True, reason)


def best_seconds(func: PrimFunc, target: str | Target, lookup: TuningLookup) -> float | None:
    """How fast the stored best schedule of ``func`` for ``target`` ran (on the same
    stored target ``apply_best`` would replay), or None when it has none."""
    key = workload_key(func)
    stored, _ = _stored_target(key, parse_target(target), lookup)
    return None if stored is None else lookup.best_seconds(key, stored)


def _stored_target(key: str, target: Target, lookup: TuningLookup) -> tuple[str | None, str]:
    """The stored target whose records apply to ``target`` and the report's reason;
    None and why not when there is none. A GPU's records apply to its architecture
    alone; a CPU's to the same CPU with no feature it lacks."""
    canonical = str(target)
    stored = lookup.targets(key)
    if canonical in stored:
        return canonical, "replayed the best stored schedule"
    if isinstance(target, CudaTarget):
        return None, "no stored schedule for this target"
    refused = []
    for text in stored:
        try:
            other = LLVMTarget.parse(text)
        except TargetError:
            continue
        lacking = target.lacks(other)
        if lacking:
            refused.append(f"{text} needs {','.join(lacking)}")
        elif (other.cpu, other.num_cores, other.triple) == (
            target.cpu,
            target.num_cores,
            target.triple,
        ):
            return text, f"replayed the best stored schedule of {text}"
    if refused:
        return None, "not applied: tuned for features this target lacks: " + "; ".join(refused)
    return None, "no stored schedule for this target"
