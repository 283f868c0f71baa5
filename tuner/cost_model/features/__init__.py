"""Feature extraction for cost models: ``create("decision" | "loop_nest" | "combined")``.

``decision`` reads a point's decisions (microseconds a row, what the simulated
annealing of the model-based search scores thousands of points with);
``loop_nest`` reads the lowered loop nest (about 20 ms a row, and comparable
across spaces and workloads); ``combined`` is both side by side.
"""

from __future__ import annotations

from typing import Any

from tuner.cost_model.base import CostModelError
from tuner.cost_model.features.base import FeatureExtractor
from tuner.cost_model.features.combined import CombinedFeatures
from tuner.cost_model.features.decision import DecisionFeatures
from tuner.cost_model.features.loop_nest import LoopNestFeatures, function_features


def _combined() -> CombinedFeatures:
    return CombinedFeatures([DecisionFeatures(), LoopNestFeatures()])


KINDS = {"decision": DecisionFeatures, "loop_nest": LoopNestFeatures, "combined": _combined}


def create(kind: str, **options: Any) -> FeatureExtractor:
    """The extractor of kind ``kind`` (one of ``KINDS``)."""
    if kind not in KINDS:
        raise CostModelError(f"unknown feature kind {kind!r}; the kinds are {sorted(KINDS)}")
    return KINDS[kind](**options)


__all__ = [
    "KINDS",
    "CombinedFeatures",
    "DecisionFeatures",
    "FeatureExtractor",
    "LoopNestFeatures",
    "create",
    "function_features",
]
