"""The ``cfg`` a template receives: it defines knobs, then hands out the chosen entities.

A template runs twice in its life. First with a ``KnobCollector``, which records
each ``define_*`` call as a Knob and stops the template at its first ``cfg[name]``
read: knobs are defined from the workload alone, before any choice is used, so
every config of a space has the same knobs. Then, once per config, with a
``ConfigEntity``, which checks each definition against the space's knob and
records the config's choice in the schedule's trace as a sampling instruction
(``sample_perfect_tile`` for an exact split of a loop, ``sample_categorical``
otherwise), one per knob in definition order: the knobs are the decisions of the
template's space, and a stored trace reads back into them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from compiler.ir.expr import IntImm
from compiler.schedule import ExprRV, LoopRV, Schedule
from compiler.target.parse import Target
from tuner.space.base import SpaceError
from tuner.space.knobs import Knob, annotate_knob, other_knob, reorder_knob, split_knob


class KnobsDefined(Exception):
    """Raised by a collecting cfg at the first ``cfg[name]``: the knobs are all known.
    Only ``TemplateSpace`` catches it; a template must not."""


class _Definitions:
    """The ``define_*`` calls shared by both modes; ``_add`` says what a definition does."""

    def __init__(self, sch: Schedule, target: Target) -> None:
        self.sch = sch
        self.target = target

    def define_split(
        self,
        name: str,
        loop: LoopRV | int,
        *,
        num_outputs: int = 2,
        policy: str = "factors",
        max_factor: int | None = None,
        candidate: Sequence[Sequence[int | None]] | None = None,
    ) -> None:
        """Split ``loop`` (a loop handle, or just its extent) into ``num_outputs``."""
        extent = self._extent(name, loop)
        knob = split_knob(name, extent, num_outputs, policy, max_factor, candidate)
        self._add(knob, loop if isinstance(loop, LoopRV) else None)

    def define_reorder(
        self,
        name: str,
        axes: Sequence[LoopRV] | int,
        *,
        policy: str = "all",
        candidate: Sequence[Sequence[int]] | None = None,
    ) -> None:
        """An order of ``axes`` (loop handles, or how many there are)."""
        count = axes if isinstance(axes, int) else len(axes)
        self._add(reorder_knob(name, count, policy, candidate), None)

    def define_annotate(
        self,
        name: str,
        axes: Sequence[LoopRV] | int,
        *,
        policy: str,
        candidate: Sequence[Sequence[str]] | None = None,
    ) -> None:
        """A loop kind (none, unroll, vec) for each of ``axes``."""
        count = axes if isinstance(axes, int) else len(axes)
        self._add(annotate_knob(name, count, policy, candidate), None)

    def define_knob(self, name: str, values: Sequence[Any]) -> None:
        """A choice among plain ``values``."""
        self._add(other_knob(name, list(values)), None)

    def _extent(self, name: str, loop: LoopRV | int) -> int:
        if isinstance(loop, int) and not isinstance(loop, bool) and loop > 0:
            return loop
        if not isinstance(loop, LoopRV):
            raise SpaceError(
                f"define_split {name!r}: give a loop handle or a positive extent, not {loop!r}"
            )
        extent = self.sch.get(loop).extent
        if not isinstance(extent, IntImm):
            raise SpaceError(f"define_split {name!r}: loop extent {extent} is not a constant")
        return extent.value

    def _add(self, knob: Knob, loop: LoopRV | None) -> None:
        raise NotImplementedError


class KnobCollector(_Definitions):
    """The collecting ``cfg``: gathers knob definitions, in order."""

    def __init__(self, sch: Schedule, target: Target) -> None:
        super().__init__(sch, target)
        self.knobs: list[Knob] = []
        self.tiles: list[bool] = []

    def _add(self, knob: Knob, loop: LoopRV | None) -> None:
        if any(k.name == knob.name for k in self.knobs):
            raise SpaceError(f"knob {knob.name!r} is defined twice; give each knob its own name")
        self.knobs.append(knob)
        self.tiles.append(records_a_tile(knob, loop))

    def __getitem__(self, name: str) -> Any:
        raise KnobsDefined(name)


class ConfigEntity(_Definitions):
    """The applying ``cfg``: one config's choices, recorded in ``sch``'s trace."""

    def __init__(
        self, sch: Schedule, target: Target, knobs: Sequence[Knob], choices: Sequence[int]
    ) -> None:
        super().__init__(sch, target)
        self._knobs = list(knobs)
        self._choices = list(choices)
        self._entities: dict[str, Any] = {}

    def _add(self, knob: Knob, loop: LoopRV | None) -> None:
        position = len(self._entities)
        expected = self._knobs[position] if position < len(self._knobs) else None
        if expected != knob:
            raise SpaceError(
                f"the template defined knob {knob.name!r} ({knob.kind}, {len(knob)} choices) "
                f"where the space has {expected!r}; knobs must depend on the workload only"
            )
        choice = self._choices[position]
        entity = knob.entities[choice]
        self._entities[knob.name] = _record(self.sch, knob, choice, entity, loop)

    def __getitem__(self, name: str) -> Any:
        if len(self._entities) != len(self._knobs):
            missing = [k.name for k in self._knobs[len(self._entities) :]]
            raise SpaceError(
                f"cfg[{name!r}] read before knobs {missing} were defined; define every knob "
                "before reading any"
            )
        if name not in self._entities:
            raise SpaceError(f"no knob {name!r}; the template defines {list(self._entities)}")
        return self._entities[name]


def _record(sch: Schedule, knob: Knob, choice: int, entity: Any, loop: LoopRV | None) -> Any:
    """Put the choice in the trace and return the entity view the template uses."""
    if loop is not None and records_a_tile(knob, loop):
        max_inner = max(e[-1] for e in knob.entities)
        factors = sch.sample_perfect_tile(
            loop, n=len(entity), max_innermost_factor=max_inner, decision=list(entity)
        )
        return SplitEntity(tuple(entity), tuple(factors))
    candidates = categorical_candidates(knob)
    sch.sample_categorical(candidates=candidates, probs=[1.0] * len(knob), decision=choice)
    if knob.kind == "split":
        return SplitEntity(tuple(entity), (None, *entity[1:]))
    if knob.kind == "reorder":
        return ReorderEntity(tuple(entity))
    if knob.kind == "annotate":
        return AnnotateEntity(tuple(entity))
    return OtherEntity(entity)


def records_a_tile(knob: Knob, loop: LoopRV | None) -> bool:
    """Whether the knob's choice is recorded as ``sample_perfect_tile`` (an exact split
    of a loop handle) rather than ``sample_categorical``."""
    return knob.kind == "split" and knob.perfect and loop is not None


def categorical_candidates(knob: Knob) -> list[int]:
    """The candidates a knob's ``sample_categorical`` lists: its values when they are
    plain ints (so the trace reads ``candidates=[1, 4, 16]``), else the positions."""
    values = list(knob.entities)
    if knob.kind == "other" and all(type(v) is int for v in values):
        return values
    return list(range(len(values)))


@dataclass(frozen=True)
class SplitEntity:
    """The chosen factors (``size``, outermost first) and what ``split`` receives."""

    size: tuple[int, ...]
    factors: tuple[int | ExprRV | None, ...]

    def apply(self, sch: Schedule, loop: LoopRV) -> list[LoopRV]:
        return sch.split(loop, list(self.factors))


@dataclass(frozen=True)
class ReorderEntity:
    perm: tuple[int, ...]

    def apply(self, sch: Schedule, loops: Sequence[LoopRV]) -> list[LoopRV]:
        """Reorder ``loops`` by the chosen permutation; returns them in the new order."""
        ordered = [loops[p] for p in self.perm]
        if list(self.perm) != sorted(self.perm):
            sch.reorder(*ordered)
        return ordered


@dataclass(frozen=True)
class AnnotateEntity:
    anns: tuple[str, ...]

    def apply(self, sch: Schedule, loops: Sequence[LoopRV]) -> None:
        for loop, annotation in zip(loops, self.anns, strict=True):
            if annotation == "unroll":
                sch.unroll(loop)
            elif annotation == "vec":
                sch.vectorize(loop)


@dataclass(frozen=True)
class OtherEntity:
    val: Any
