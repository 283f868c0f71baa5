"""Search strategies over a space's decisions, with the ask/tell protocol (see ``base``).

``create(kind, space=..., max_trials=..., **options)`` with kind ``random``,
``grid`` (an enumerable space only), ``ga`` (genetic algorithm), ``xgb``
(model-based: XGBoost ranks, simulated annealing proposes, epsilon-greedy
explores) or ``evolutionary`` (MetaSchedule's: a population evolved by mutators,
scored by a cost model). Kind ``auto`` picks one for the space: ``xgb`` for a space
that numbers its points (a knob template, whose decisions the annealing scores by
the thousand), ``evolutionary`` for the others (generated spaces and schedule
functions, whose points are programs to featurize).
"""

from __future__ import annotations

from typing import Any

from tuner.search.base import (
    MeasureResult,
    Observation,
    SearchError,
    SearchStrategy,
    Timing,
)
from tuner.search.evolutionary import EvolutionarySearch
from tuner.search.genetic import GeneticSearch
from tuner.search.grid_search import GridSearch
from tuner.search.model_based import ModelBasedSearch
from tuner.search.model_guided import ModelGuidedSearch, transfer_records
from tuner.search.random_search import RandomSearch
from tuner.space.base import EnumerableSpace, Space

KINDS: dict[str, type[SearchStrategy]] = {
    "random": RandomSearch,
    "grid": GridSearch,
    "ga": GeneticSearch,
    "xgb": ModelBasedSearch,
    "evolutionary": EvolutionarySearch,
}


AUTO = "auto"


def create(kind: str, **options: Any) -> SearchStrategy:
    """The strategy of kind ``kind`` (one of ``KINDS``, or ``auto``) built from
    ``options`` (``space`` and ``max_trials`` always; see each class for the rest)."""
    if kind == AUTO:
        kind = kind_for(options.get("space"))
    if kind not in KINDS:
        raise SearchError(
            f"unknown search kind {kind!r}; the kinds are {AUTO} and {', '.join(sorted(KINDS))}"
        )
    return KINDS[kind](**options)


def kind_for(space: Space | None) -> str:
    """The search ``auto`` picks for ``space``."""
    return "xgb" if isinstance(space, EnumerableSpace) else "evolutionary"


__all__ = [
    "AUTO",
    "KINDS",
    "EvolutionarySearch",
    "GeneticSearch",
    "GridSearch",
    "MeasureResult",
    "ModelBasedSearch",
    "ModelGuidedSearch",
    "Observation",
    "RandomSearch",
    "SearchError",
    "SearchStrategy",
    "Timing",
    "create",
    "kind_for",
    "transfer_records",
]
