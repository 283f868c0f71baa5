"""Search strategies over a space's decisions, with the ask/tell protocol (see ``base``).

``create(kind, space=..., max_trials=..., **options)`` with kind ``random``,
``grid`` (an enumerable space only), ``ga`` (genetic algorithm), ``xgb``
(model-based: XGBoost ranks, simulated annealing proposes, epsilon-greedy
explores) or ``evolutionary`` (MetaSchedule's: a population evolved by mutators,
scored by a cost model).
"""

from __future__ import annotations

from typing import Any

from tuner.search.base import (
    Measurement,
    MeasureResult,
    Observation,
    SearchError,
    SearchStrategy,
)
from tuner.search.evolutionary import EvolutionarySearch
from tuner.search.genetic import GeneticSearch
from tuner.search.grid_search import GridSearch
from tuner.search.model_based import ModelBasedSearch
from tuner.search.model_guided import ModelGuidedSearch, transfer_records
from tuner.search.random_search import RandomSearch

KINDS: dict[str, type[SearchStrategy]] = {
    "random": RandomSearch,
    "grid": GridSearch,
    "ga": GeneticSearch,
    "xgb": ModelBasedSearch,
    "evolutionary": EvolutionarySearch,
}


def create(kind: str, **options: Any) -> SearchStrategy:
    """The strategy of kind ``kind`` (one of ``KINDS``) built from ``options``
    (``space`` and ``max_trials`` always; see each class for the rest)."""
    if kind not in KINDS:
        raise SearchError(f"unknown search kind {kind!r}; the kinds are {sorted(KINDS)}")
    return KINDS[kind](**options)


__all__ = [
    "KINDS",
    "EvolutionarySearch",
    "GeneticSearch",
    "GridSearch",
    "MeasureResult",
    "Measurement",
    "ModelBasedSearch",
    "ModelGuidedSearch",
    "Observation",
    "RandomSearch",
    "SearchError",
    "SearchStrategy",
    "create",
    "transfer_records",
]
