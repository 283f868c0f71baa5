"""Mutators: small changes to one decision that an evolutionary search makes its
children with (TVM MetaSchedule's mutators).

``tile_size`` moves a prime factor between the tiles of a perfect tiling,
``unroll`` and ``parallel`` change decisions of those roles, ``compute_location``
moves a block to another legal loop, ``categorical`` redraws any other
categorical decision. ``mix(probabilities)`` draws them with the given
probabilities (by kind; ``DEFAULT_PROBABILITIES`` where none are given).
"""

from __future__ import annotations

from collections.abc import Mapping

from tuner.search.base import SearchError
from tuner.search.mutators.base import Mutator, RedrawMutator
from tuner.search.mutators.categorical import CategoricalMutator
from tuner.search.mutators.compute_location import ComputeLocationMutator
from tuner.search.mutators.mix import MutatorMix
from tuner.search.mutators.parallel import ParallelMutator
from tuner.search.mutators.tile_size import TileSizeMutator
from tuner.search.mutators.unroll import UnrollMutator

KINDS: dict[str, type[Mutator]] = {
    m.name: m
    for m in (
        TileSizeMutator,
        CategoricalMutator,
        ComputeLocationMutator,
        UnrollMutator,
        ParallelMutator,
    )
}

# MetaSchedule's CPU defaults (tile size 0.9, compute location 0.05, unroll 0.03,
# parallel 0.02), plus the categorical choices a knob template has and MetaSchedule's
# sketches do not (a loop order, a packing), which move the schedule as much as tiles.
DEFAULT_PROBABILITIES: dict[str, float] = {
    "tile_size": 0.9,
    "categorical": 0.3,
    "compute_location": 0.05,
    "unroll": 0.03,
    "parallel": 0.02,
}


def create(kind: str) -> Mutator:
    """The mutator of kind ``kind`` (one of ``KINDS``)."""
    if kind not in KINDS:
        raise SearchError(f"unknown mutator kind {kind!r}; the kinds are {sorted(KINDS)}")
    return KINDS[kind]()


def mix(probabilities: Mapping[str, float] | None = None) -> MutatorMix:
    """The mutators of ``probabilities`` (kind to probability; default
    ``DEFAULT_PROBABILITIES``), drawn with those probabilities."""
    chosen = DEFAULT_PROBABILITIES if probabilities is None else probabilities
    return MutatorMix({create(kind): weight for kind, weight in chosen.items()})


__all__ = [
    "DEFAULT_PROBABILITIES",
    "KINDS",
    "CategoricalMutator",
    "ComputeLocationMutator",
    "Mutator",
    "MutatorMix",
    "ParallelMutator",
    "RedrawMutator",
    "TileSizeMutator",
    "UnrollMutator",
    "create",
    "mix",
]
