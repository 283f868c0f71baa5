"""Traces: the recorded list of schedule instructions, as data.

A trace prints as the Python calls that rebuild the schedule, converts to and
from JSON, and replays on a fresh Schedule of the same workload. Sampling
instructions carry their decision; replaying with other decisions (a tuner's
mutation) gives a neighbouring schedule.

JSON is the form that crosses processes and the database: random variables are
named (``b0``, ``l1``, ``v2``) and referred to as ``{"rv": "l1"}``; nothing in it
is evaluated. The printed Python is for people, and for tests that check it runs.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from compiler.ir.expr import Var
from compiler.schedule.errors import ScheduleError
from compiler.schedule.handles import BlockRV, ExprRV, InlineLocation, LoopRV, RootLocation

if TYPE_CHECKING:
    from compiler.schedule.schedule import Schedule

TRACE_FORMAT_VERSION = 1

SAMPLING_KINDS = ("sample_perfect_tile", "sample_categorical", "sample_compute_location")

_RV_TYPES = (BlockRV, LoopRV, ExprRV, RootLocation, InlineLocation)
_RV_PREFIX = {BlockRV: "b", LoopRV: "l", ExprRV: "v", RootLocation: "root", InlineLocation: "inl"}

# Set (to True) on every Schedule method whose calls a trace records and replays.
INSTRUCTION_ATTR = "is_instruction"


@dataclass(frozen=True)
class Instruction:
    """One schedule call: its kind (the Schedule method name), its keyword inputs
    (random variables among them), its outputs, and for sampling its decision.

    ``outputs_are_list`` says the call returned a list (``get_loops``, ``split``),
    which matters for printing: a one-element list unpacks as ``l1, = ...``.
    """

    kind: str
    inputs: dict[str, Any]
    outputs: tuple[Any, ...]
    decision: Any = None
    outputs_are_list: bool = False


class Trace:
    def __init__(self, instructions: list[Instruction] | None = None) -> None:
        self.instructions: list[Instruction] = list(instructions or [])

    def append(self, instruction: Instruction) -> None:
        self.instructions.append(instruction)

    def copy(self) -> Trace:
        return Trace(self.instructions)

    def __len__(self) -> int:
        return len(self.instructions)

    @property
    def decisions(self) -> dict[int, Any]:
        """Decisions of the sampling instructions, by instruction index."""
        return {
            i: inst.decision
            for i, inst in enumerate(self.instructions)
            if inst.kind in SAMPLING_KINDS
        }

    def with_decision(self, index: int, decision: Any) -> Trace:
        """A copy whose sampling instruction ``index`` has ``decision`` instead."""
        self._check_sampling_index(index)
        inst = self.instructions[index]
        changed = list(self.instructions)
        changed[index] = dataclasses.replace(inst, decision=decision)
        return Trace(changed)

    def _check_sampling_index(self, index: Any) -> None:
        sampling = sorted(self.decisions)
        if index not in sampling:
            raise ScheduleError(
                f"instruction {index!r} is not a sampling instruction of this trace; "
                f"the sampling instructions are at {sampling}"
            )

    # replay --------------------------------------------------------------------

    def apply_to_schedule(self, sch: Schedule, decisions: Mapping[int, Any] | None = None) -> None:
        """Replay every instruction on ``sch``; ``decisions`` overrides sampled ones
        by instruction index. Raises ``ScheduleError`` if a step is illegal there."""
        self.replay_range(sch, 0, len(self.instructions), decisions=decisions)

    def replay_range(
        self,
        sch: Schedule,
        start: int,
        stop: int,
        *,
        decisions: Mapping[int, Any] | None = None,
        bindings: dict[int, Any] | None = None,
    ) -> dict[int, Any]:
        """Replay instructions ``start`` to ``stop - 1`` on ``sch``, which has the
        instructions before ``start`` replayed already, their outputs bound in
        ``bindings`` (what the replay of those returned); returns the bindings after
        ``stop``. A schedule with a prefix replayed once can so be copied and resumed
        under several decisions, as a space that weighs each value of one decision does."""
        decisions = dict(decisions or {})
        for index in decisions:
            self._check_sampling_index(index)
        rv_map: dict[int, Any] = {} if bindings is None else bindings
        for index in range(start, stop):
            inst = self.instructions[index]
            method = getattr(sch, inst.kind, None)
            if method is None or not getattr(method, INSTRUCTION_ATTR, False):
                raise ScheduleError(f"trace instruction {index} has unknown kind {inst.kind!r}")
            inputs = {k: _map_rvs(v, rv_map) for k, v in inst.inputs.items()}
            if inst.kind in SAMPLING_KINDS:
                inputs["decision"] = decisions.get(index, inst.decision)
            args = _bind(method, inputs, f"trace instruction {index} ({inst.kind})")
            new_outputs = _as_outputs(method(*args, **inputs))
            if len(new_outputs) != len(inst.outputs):
                raise ScheduleError(
                    f"trace instruction {index} ({inst.kind}) gave {len(new_outputs)} outputs "
                    f"on replay, the trace recorded {len(inst.outputs)}"
                )
            for old, new in zip(inst.outputs, new_outputs, strict=True):
                rv_map[id(old)] = new
        return rv_map

    # text and JSON ---------------------------------------------------------------

    def as_python(self) -> list[str]:
        """The trace as Python statements over a Schedule named ``sch``."""
        names = _RvNames()
        lines = []
        for inst in self.instructions:
            args = [f"{k}={_python_value(v, names)}" for k, v in inst.inputs.items()]
            if inst.kind in SAMPLING_KINDS:
                args.append(f"decision={_python_value(inst.decision, names)}")
            call = f"sch.{inst.kind}({', '.join(args)})"
            outs = [names.define(o) for o in inst.outputs]
            if not outs:
                lines.append(call)
                continue
            one_element_list = inst.outputs_are_list and len(outs) == 1
            targets = ", ".join(outs) + ("," if one_element_list else "")
            lines.append(f"{targets} = {call}")
        return lines

    def __str__(self) -> str:
        return "# from compiler import Schedule\n" + "\n".join(self.as_python())

    __repr__ = __str__

    def as_json(self) -> dict[str, Any]:
        names = _RvNames()
        insts = []
        for inst in self.instructions:
            entry: dict[str, Any] = {
                "kind": inst.kind,
                "inputs": {k: _json_value(v, names) for k, v in inst.inputs.items()},
                "outputs": [names.define(o) for o in inst.outputs],
            }
            if inst.outputs_are_list:
                entry["outputs_are_list"] = True
            if inst.kind in SAMPLING_KINDS:
                entry["decision"] = _json_value(inst.decision, names)
            insts.append(entry)
        return {"version": TRACE_FORMAT_VERSION, "instructions": insts}

    def to_json_string(self) -> str:
        """The canonical JSON text: sorted keys, no whitespace, random variables named
        by order of definition, so two traces of the same steps give the same text."""
        return json.dumps(self.as_json(), sort_keys=True, separators=(",", ":"))

    @property
    def structural_hash(self) -> str:
        """The hash of the canonical JSON: equal for traces of the same steps and
        decisions, whichever objects they hold; what candidates and records dedupe by."""
        return trace_hash(self.to_json_string())

    @staticmethod
    def from_json(data: Mapping[str, Any] | str) -> Trace:
        """Rebuild a trace from ``as_json`` output (or its JSON text); raises
        ``ScheduleError`` on a malformed document."""
        document: Any = data
        if isinstance(data, str):
            try:
                document = json.loads(data)
            except json.JSONDecodeError as err:
                raise ScheduleError(f"trace JSON does not parse: {err}") from None
        version = document.get("version") if isinstance(document, Mapping) else None
        if type(version) is not int or version != TRACE_FORMAT_VERSION:
            raise ScheduleError(
                f"trace JSON must be an object with version {TRACE_FORMAT_VERSION}, "
                f"got version {version!r}"
            )
        raw = document.get("instructions")
        if not isinstance(raw, list):
            raise ScheduleError("trace JSON needs an 'instructions' list")
        rvs: dict[str, Any] = {}
        return Trace([_instruction_from_json(i, entry, rvs) for i, entry in enumerate(raw)])


def canonical_trace(trace: Trace | Mapping[str, Any] | str) -> str:
    """The trace as canonical JSON text (sorted keys, no whitespace), so one schedule
    always hashes the same whichever form it arrived in. Text that is not JSON is
    kept as it is, for a validator to report."""
    if isinstance(trace, Trace):
        return trace.to_json_string()
    document: Any = trace
    if isinstance(trace, str):
        try:
            document = json.loads(trace)
        except json.JSONDecodeError:
            return trace
    return json.dumps(document, sort_keys=True, separators=(",", ":"))


def trace_hash(trace_json: str) -> str:
    """The structural hash of canonical trace JSON (see ``canonical_trace``)."""
    return hashlib.sha256(trace_json.encode()).hexdigest()


def _bind(method: Any, inputs: dict[str, Any], where: str) -> list[Any]:
    """Check ``inputs`` against the method's signature; a ``*args`` parameter (the
    loops of ``fuse`` and ``reorder``) is recorded by name and moves out of
    ``inputs`` into the returned positional arguments."""
    signature = _signature(getattr(method, "__func__", method))
    args: list[Any] = []
    for param in signature.parameters.values():
        if param.kind is param.VAR_POSITIONAL and param.name in inputs:
            values = inputs.pop(param.name)
            if not isinstance(values, (list, tuple)):
                raise ScheduleError(f"{where}: input {param.name!r} must be a list")
            args = list(values)
    try:
        signature.bind(*args, **inputs)
    except TypeError as err:
        raise ScheduleError(
            f"{where} has inputs {sorted(inputs)} that do not fit its signature: {err}"
        ) from None
    return args


@functools.cache
def _signature(function: Any) -> inspect.Signature:
    """The signature of a Schedule method without ``self``, read once per method
    (``inspect.signature`` took 6 % of a replay when read per instruction)."""
    signature = inspect.signature(function)
    return signature.replace(parameters=list(signature.parameters.values())[1:])


def _as_outputs(result: Any) -> tuple[Any, ...]:
    if result is None:
        return ()
    if isinstance(result, (list, tuple)):
        return tuple(result)
    return (result,)


def _map_rvs(value: Any, rv_map: dict[int, Any]) -> Any:
    if isinstance(value, _RV_TYPES):
        if id(value) not in rv_map:
            raise ScheduleError(f"trace uses {value!r} before an instruction defines it")
        return rv_map[id(value)]
    if isinstance(value, (list, tuple)):
        return type(value)(_map_rvs(v, rv_map) for v in value)
    return value


class _RvNames:
    """Names for the random variables of one trace, in order of definition."""

    def __init__(self) -> None:
        self._names: dict[int, str] = {}

    def define(self, rv: Any) -> str:
        prefix = _RV_PREFIX[type(rv)]
        name = f"{prefix}{len(self._names)}"
        self._names[id(rv)] = name
        return name

    def name(self, rv: Any) -> str:
        if id(rv) not in self._names:
            raise ScheduleError(
                f"the trace uses {rv!r}, which no instruction of the trace made; get handles "
                "from the schedule (get_block, get_loops) rather than building them"
            )
        return self._names[id(rv)]


def _python_value(value: Any, names: _RvNames) -> str:
    if isinstance(value, _RV_TYPES):
        return names.name(value)
    if isinstance(value, list):
        return "[" + ", ".join(_python_value(v, names) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(_python_value(v, names) for v in value) + ",)"
    return repr(value)


def _json_value(value: Any, names: _RvNames) -> Any:
    if isinstance(value, _RV_TYPES):
        return {"rv": names.name(value)}
    if isinstance(value, (list, tuple)):
        return [_json_value(v, names) for v in value]
    if isinstance(value, Mapping):
        return {"dict": {str(k): _json_value(v, names) for k, v in value.items()}}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise ScheduleError(f"cannot store {value!r} ({type(value).__name__}) in a trace")


def _value_from_json(value: Any, rvs: dict[str, Any], where: str) -> Any:
    if isinstance(value, dict):
        if set(value) == {"rv"}:
            name = value["rv"]
            if not isinstance(name, str) or name not in rvs:
                raise ScheduleError(f"{where}: random variable {name!r} is used before defined")
            return rvs[name]
        if set(value) == {"dict"} and isinstance(value["dict"], dict):
            return {k: _value_from_json(v, rvs, where) for k, v in value["dict"].items()}
        raise ScheduleError(f"{where}: unexpected object {value!r}")
    if isinstance(value, list):
        return [_value_from_json(v, rvs, where) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise ScheduleError(f"{where}: unexpected value {value!r}")


_PLACEHOLDER_TYPES = {
    "b": BlockRV,
    "l": LoopRV,
    "v": ExprRV,
    "root": RootLocation,
    "inl": InlineLocation,
}


def _placeholder(name: str, where: str) -> Any:
    """A stand-in object for a trace output; replay maps it to the real handle."""
    prefix = name.rstrip("0123456789")
    kind = _PLACEHOLDER_TYPES.get(prefix)
    if kind is None or prefix == name:
        raise ScheduleError(
            f"{where}: output name {name!r} must be one of the prefixes "
            f"{sorted(_PLACEHOLDER_TYPES)} followed by a number"
        )
    if kind is BlockRV:
        return BlockRV("?", "?")
    if kind is LoopRV:
        return LoopRV(Var(name), "?")
    if kind is ExprRV:
        return ExprRV(-1)
    return kind()


def _instruction_from_json(index: int, entry: Any, rvs: dict[str, Any]) -> Instruction:
    where = f"trace instruction {index}"
    if not isinstance(entry, Mapping):
        raise ScheduleError(f"{where} is not an object")
    kind = entry.get("kind")
    inputs = entry.get("inputs")
    outputs = entry.get("outputs")
    is_list = entry.get("outputs_are_list", False)
    if (
        not isinstance(kind, str)
        or not isinstance(inputs, Mapping)
        or not isinstance(outputs, list)
    ):
        raise ScheduleError(f"{where} needs 'kind' (string), 'inputs' (object), 'outputs' (list)")
    if not isinstance(is_list, bool):
        raise ScheduleError(f"{where}: 'outputs_are_list' must be true or false")
    if kind not in SAMPLING_KINDS and entry.get("decision") is not None:
        raise ScheduleError(f"{where}: {kind} is not a sampling instruction but has a decision")
    decoded_inputs = {str(k): _value_from_json(v, rvs, where) for k, v in inputs.items()}
    decision = _value_from_json(entry.get("decision"), rvs, where)
    decoded_outputs = []
    for name in outputs:
        if not isinstance(name, str):
            raise ScheduleError(f"{where}: output names must be strings, got {name!r}")
        if name in rvs:
            raise ScheduleError(f"{where}: output {name!r} is defined a second time")
        rv = _placeholder(name, where)
        rvs[name] = rv
        decoded_outputs.append(rv)
    return Instruction(kind, decoded_inputs, tuple(decoded_outputs), decision, is_list)
