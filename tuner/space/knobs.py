"""Knobs: the named choices of a template, each a finite list of entities.

A knob is data: its name, its kind, the entities it chooses among, and how each
entity reads as numbers for a cost model. The four kinds follow AutoTVM:

- ``split``: factors of a loop, outermost first (``(8, 4, 16)`` splits 512 into
  three loops); policies ``factors`` (every exact factorization), ``power2``
  (powers of two inside, the outermost rounded up) and ``candidate`` (a list).
- ``reorder``: a permutation of some loops; policies ``all``, ``identity`` and
  ``candidate``.
- ``annotate``: a loop kind per loop (``none``, ``unroll``, ``vec``); policies
  ``try_unroll``, ``try_vec``, ``try_unroll_vec`` and ``candidate``.
- ``other``: any list of plain values (``define_knob``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tuner.space.base import SpaceError

SPLIT_POLICIES = ("factors", "power2", "candidate")
REORDER_POLICIES = ("all", "identity", "candidate")
ANNOTATE_POLICIES = ("try_unroll", "try_vec", "try_unroll_vec", "candidate")
ANNOTATIONS = ("none", "unroll", "vec")


@dataclass(frozen=True)
class Knob:
    """One named choice. ``perfect`` says every entity of a split multiplies to
    ``extent`` exactly, which lets the trace record it as ``sample_perfect_tile``."""

    name: str
    kind: str
    entities: tuple[Any, ...]
    extent: int | None = None
    perfect: bool = False
    _positions: dict[Any, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.entities:
            raise SpaceError(f"knob {self.name!r} has no choices; give it at least one")
        object.__setattr__(self, "_positions", {e: k for k, e in enumerate(self.entities)})
        if len(self._positions) != len(self.entities):
            raise SpaceError(f"knob {self.name!r} lists a choice twice: {list(self.entities)}")

    def __len__(self) -> int:
        return len(self.entities)

    def position(self, entity: Any) -> int | None:
        """The index of ``entity`` among the choices, or None when it is not one."""
        return self._positions.get(entity)

    def features(self) -> np.ndarray:
        """One row of numbers per entity (see ``_entity_features``); every entity of
        a knob gives a row of the same width."""
        rows = [_entity_features(self.kind, e, k) for k, e in enumerate(self.entities)]
        return np.array(rows, dtype=float)


def _entity_features(kind: str, entity: Any, position: int) -> list[float]:
    """Split factors as log2, a permutation as positions, annotations as codes, a
    number as itself; a string knob value reads as its position in the list."""
    if kind == "split":
        return [math.log2(f) for f in entity]
    if kind == "reorder":
        return [float(p) for p in entity]
    if kind == "annotate":
        return [float(ANNOTATIONS.index(a)) for a in entity]
    if isinstance(entity, (bool, int, float)):
        return [float(entity)]
    return [float(position)]


# ---- split ---------------------------------------------------------------------------


def split_knob(
    name: str,
    extent: int,
    num_outputs: int,
    policy: str,
    max_factor: int | None,
    candidate: Sequence[Sequence[int | None]] | None,
) -> Knob:
    if not isinstance(num_outputs, int) or num_outputs < 1:
        raise SpaceError(f"define_split {name!r}: num_outputs must be an int >= 1")
    limit = extent if max_factor is None else max_factor
    if policy == "factors":
        entities = _factorizations(extent, num_outputs, limit)
    elif policy == "power2":
        entities = _power2_splits(extent, num_outputs, limit)
    elif policy == "candidate":
        entities = _candidate_splits(name, extent, num_outputs, candidate)
    else:
        raise SpaceError(
            f"define_split {name!r}: unknown policy {policy!r}; use one of {SPLIT_POLICIES}"
        )
    perfect = all(math.prod(e) == extent for e in entities)
    return Knob(name, "split", tuple(entities), extent, perfect)


def _factorizations(extent: int, parts: int, limit: int) -> list[tuple[int, ...]]:
    """Every ordered ``(outer, ..., inner)`` whose product is ``extent``, the inner
    factors at most ``limit``."""
    if parts == 1:
        return [(extent,)]
    found = []
    for inner in _divisors(extent):
        if inner > limit:
            continue
        for rest in _factorizations(extent // inner, parts - 1, limit):
            found.append((*rest, inner))
    return sorted(found)


def _power2_splits(extent: int, parts: int, limit: int) -> list[tuple[int, ...]]:
    """Inner factors powers of two (product at most ``extent``), outermost rounded up."""
    powers = [2**p for p in range(int(math.log2(max(1, min(extent, limit)))) + 1)]
    found = []
    for inner in itertools.product(powers, repeat=parts - 1):
        product = math.prod(inner)
        if product <= extent:
            found.append((math.ceil(extent / product), *inner))
    return sorted(found)


def _candidate_splits(
    name: str, extent: int, parts: int, candidate: Sequence[Sequence[int | None]] | None
) -> list[tuple[int, ...]]:
    if not candidate:
        raise SpaceError(f"define_split {name!r}: policy 'candidate' needs candidate=[...]")
    found = []
    for entry in candidate:
        factors = list(entry)
        if len(factors) != parts or not all(_positive(f) for f in factors[1:]):
            raise SpaceError(
                f"define_split {name!r}: candidate {entry!r} must be {parts} positive ints "
                "(the first may be None, meaning rounded up)"
            )
        inner_factors = [int(f) for f in factors[1:] if f is not None]
        inner = math.prod(inner_factors)
        if inner > extent:
            raise SpaceError(
                f"define_split {name!r}: candidate {entry!r} has inner product {inner} "
                f"above the extent {extent}"
            )
        first = factors[0]
        outer = math.ceil(extent / inner) if first is None or first == -1 else first
        if not _positive(outer) or outer * inner < extent:
            raise SpaceError(
                f"define_split {name!r}: candidate {entry!r} covers {outer * inner} of "
                f"{extent} iterations"
            )
        found.append((outer, *inner_factors))
    return found


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


# ---- reorder, annotate, other ----------------------------------------------------------


def reorder_knob(
    name: str, count: int, policy: str, candidate: Sequence[Sequence[int]] | None
) -> Knob:
    identity = tuple(range(count))
    if policy == "all":
        entities = list(itertools.permutations(identity))
    elif policy == "identity":
        entities = [identity]
    elif policy == "candidate":
        if not candidate:
            raise SpaceError(f"define_reorder {name!r}: policy 'candidate' needs candidate=[...]")
        entities = [tuple(p) for p in candidate]
        for perm in entities:
            if sorted(perm) != list(identity):
                raise SpaceError(
                    f"define_reorder {name!r}: candidate {list(perm)} is not a permutation "
                    f"of {list(identity)}"
                )
    else:
        raise SpaceError(
            f"define_reorder {name!r}: unknown policy {policy!r}; use one of {REORDER_POLICIES}"
        )
    return Knob(name, "reorder", tuple(entities))


def annotate_knob(
    name: str, count: int, policy: str, candidate: Sequence[Sequence[str]] | None
) -> Knob:
    if policy == "try_unroll":
        entities = list(itertools.product(("none", "unroll"), repeat=count))
    elif policy == "try_vec":
        entities = [("none",) * count, ("none",) * (count - 1) + ("vec",)]
    elif policy == "try_unroll_vec":
        inner = list(itertools.product(("none", "unroll"), repeat=count - 1))
        entities = [(*rest, last) for rest in inner for last in ANNOTATIONS]
    elif policy == "candidate":
        if not candidate:
            raise SpaceError(f"define_annotate {name!r}: policy 'candidate' needs candidate=[...]")
        entities = [tuple(c) for c in candidate]
        for entry in entities:
            if len(entry) != count or any(a not in ANNOTATIONS for a in entry):
                raise SpaceError(
                    f"define_annotate {name!r}: candidate {list(entry)} must give one of "
                    f"{ANNOTATIONS} for each of the {count} loops"
                )
    else:
        raise SpaceError(
            f"define_annotate {name!r}: unknown policy {policy!r}; use one of {ANNOTATE_POLICIES}"
        )
    return Knob(name, "annotate", tuple(entities))


def other_knob(name: str, values: Sequence[Any]) -> Knob:
    for value in values:
        if not isinstance(value, (bool, int, float, str)):
            raise SpaceError(
                f"define_knob {name!r}: value {value!r} must be a bool, int, float or str"
            )
    return Knob(name, "other", tuple(values))
