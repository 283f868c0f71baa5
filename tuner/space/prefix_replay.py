"""Incremental replay of a space's design traces.

Candidates of one design differ only in their decisions, and an evolutionary
search's children differ from their parents in one. A candidate's schedule is
the design replayed under its decisions, so two candidates share every step before
the first sampling instruction whose decision differs. ``PrefixReplay`` keeps the
schedule as it stood before each sampling instruction of the designs it replayed
(keyed by the decisions before it) and resumes a new candidate from the longest
such prefix it holds: the steps before the first sample (a convolution's inlined
bias and activation) run once per design, and a child mutated late in its trace
replays only its tail. Schedules are persistent values (a copy shares the program),
so a kept prefix costs its trace and bindings, not a copy of the program.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from compiler.ir.function import PrimFunc
from compiler.schedule import Schedule, Trace
from tuner.space.base import trace_decision

# Prefixes a space keeps, least recently used first out: about 40 candidates of a
# blocked convolution's 25 sampling instructions, an evolutionary population.
KEPT_PREFIXES = 1024

_Key = tuple[int, tuple[Any, ...]]


class PrefixReplay:
    """Replays the design traces ``designs`` on ``func``, keeping up to ``kept``
    prefixes."""

    def __init__(
        self, func: PrimFunc, designs: Sequence[Trace], *, kept: int = KEPT_PREFIXES
    ) -> None:
        self.func = func
        self.designs = designs
        self.kept = kept
        self._sampled = tuple(tuple(sorted(d.decisions)) for d in designs)
        self._prefixes: OrderedDict[_Key, tuple[Schedule, dict[int, Any]]] = OrderedDict()

    def replay(self, design: int, values: tuple[Any, ...]) -> Schedule:
        """Design ``design`` replayed with ``values`` for its sampling instructions (in
        order), as ``Trace.apply_to_schedule`` on a fresh schedule would; raises
        ScheduleError where a step is illegal."""
        trace = self.designs[design]
        sampled = self._sampled[design]
        decisions = {i: trace_decision(v) for i, v in zip(sampled, values, strict=True)}
        start, position, sch, bindings = self._longest_prefix(design, values)
        for k in range(start, len(sampled)):
            if position < sampled[k]:
                trace.replay_range(
                    sch, position, sampled[k], decisions=decisions, bindings=bindings
                )
                position = sampled[k]
                self._keep((design, values[:k]), sch, bindings)
        trace.replay_range(
            sch, position, len(trace.instructions), decisions=decisions, bindings=bindings
        )
        return sch

    def _longest_prefix(
        self, design: int, values: tuple[Any, ...]
    ) -> tuple[int, int, Schedule, dict[int, Any]]:
        """(k, position, schedule, bindings): a copy of the kept schedule before
        sampling instruction k (at instruction ``position``), for the largest k kept;
        (0, 0, a fresh schedule, {}) when none is."""
        for k in range(len(values) - 1, -1, -1):
            key = (design, values[:k])
            found = self._prefixes.get(key)
            if found is not None:
                self._prefixes.move_to_end(key)
                sch, bindings = found
                return k, self._sampled[design][k], sch.copy(), dict(bindings)
        return 0, 0, Schedule(self.func), {}

    def _keep(self, key: _Key, sch: Schedule, bindings: dict[int, Any]) -> None:
        self._prefixes[key] = (sch.copy(), dict(bindings))
        self._prefixes.move_to_end(key)
        while len(self._prefixes) > self.kept:
            self._prefixes.popitem(last=False)
