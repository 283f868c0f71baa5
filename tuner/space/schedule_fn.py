"""``ScheduleFnSpace``: the space of a user's schedule function (MetaSchedule's
ScheduleFn).

The function ``f(sch)`` schedules the workload with primitives and draws its
choices with sampling instructions (``sample_perfect_tile``,
``sample_categorical``, ``sample_compute_location``), passing what they return to
the primitives. Running it once records the design trace; a candidate is that
trace replayed with other decisions, so the function itself runs only once.
The domain of each sampling instruction comes from the design
(``designs.sampling_domain``).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable

from compiler.ir.function import PrimFunc
from compiler.schedule import Schedule, ScheduleError, Trace
from compiler.target.parse import Target, parse_target
from tuner.space.base import (
    Decisions,
    Domain,
    Space,
    SpaceError,
    TraceCandidate,
    decision_value,
    parse_trace,
    trace_decision,
)
from tuner.space.designs import sampling_domain, skeleton

ScheduleFn = Callable[[Schedule], None]


class ScheduleFnSpace(Space):
    """The decisions of ``schedule_fn``'s sampling instructions on ``func``; ``seed``
    draws the design trace's own decisions."""

    def __init__(
        self,
        func: PrimFunc,
        schedule_fn: ScheduleFn,
        *,
        target: str | Target = "llvm",
        seed: int = 0,
    ) -> None:
        if not callable(schedule_fn):
            raise SpaceError(f"schedule_fn must be a function f(sch), got {schedule_fn!r}")
        self.func = func
        self.schedule_fn = schedule_fn
        self.target = parse_target(target)
        self.seed = seed
        self._design = self._record_design()
        self._sampled = sorted(self._design.decisions)
        self._domains = tuple(self._domain(i) for i in self._sampled)
        self._skeleton = skeleton(self._design)

    @property
    def name(self) -> str:
        return f"schedule function {getattr(self.schedule_fn, '__name__', self.schedule_fn)}"

    def _record_design(self) -> Trace:
        sch = Schedule(self.func, seed=self.seed)
        try:
            self.schedule_fn(sch)
        except ScheduleError as err:
            raise SpaceError(f"{self.name} does not schedule this workload: {err}") from err
        except Exception as err:  # a bug in the user's function is theirs to see, in one line
            frame = traceback.extract_tb(err.__traceback__)[-1]
            raise SpaceError(
                f"{self.name} failed on this workload with {type(err).__name__}: {err} "
                f"({frame.filename}:{frame.lineno}); fix the function"
            ) from err
        trace = sch.trace
        if not trace.decisions:
            raise SpaceError(
                f"{self.name} calls no sampling instruction, so it has nothing to search; "
                "draw its choices with sch.sample_perfect_tile / sample_categorical"
            )
        return trace

    def _domain(self, index: int) -> Domain:
        return sampling_domain(self.func, self._design, index)

    def design_traces(self) -> tuple[Trace, ...]:
        return (self._design,)

    def decision_domains(self, design: int) -> tuple[Domain, ...]:
        if design != 0:
            raise SpaceError(f"a schedule function space has one design, 0; got {design!r}")
        return self._domains

    def _schedule(self, decisions: Decisions) -> Schedule:
        if decisions.design != 0 or len(decisions.values) != len(self._sampled):
            raise SpaceError(
                f"decisions {decisions} do not fit the {len(self._sampled)} sampling "
                f"instructions of {self.name}"
            )
        chosen = {
            i: trace_decision(v) for i, v in zip(self._sampled, decisions.values, strict=True)
        }
        sch = Schedule(self.func)
        self._design.apply_to_schedule(sch, chosen)
        return sch

    def _read_trace(self, trace: Trace | str) -> TraceCandidate | None:
        parsed = parse_trace(trace)
        if parsed is None or skeleton(parsed) != self._skeleton:
            return None
        values = tuple(decision_value(parsed.instructions[i].decision) for i in self._sampled)
        if any(d.position(v) is None for d, v in zip(self._domains, values, strict=True)):
            return None
        return TraceCandidate(
            self.workload_key, parsed.structural_hash, parsed, Decisions(0, values)
        )

    def for_workload(self, func: PrimFunc) -> ScheduleFnSpace | None:
        try:
            return ScheduleFnSpace(func, self.schedule_fn, target=self.target, seed=self.seed)
        except SpaceError:
            return None

    def __repr__(self) -> str:
        return f"ScheduleFnSpace({self.name!r}, {len(self._sampled)} decisions)"
