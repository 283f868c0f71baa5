"""Feature extraction for cost models: ``create(kind)``, a kind of ``KINDS``.

``decision`` reads a point's decisions (microseconds a row, what the simulated
annealing of the model-based search scores thousands of points with);
``program`` reads per-store features (operations by kind, loop annotations,
bytes, cache lines, strides, reuse, arithmetic intensity) of the scheduled
program without lowering it: under a millisecond a row on top of making the
point's candidate, and comparable across spaces and workloads, which suits a
search that makes its candidates anyway (evolution over a generated space);
``loop_nest`` reads the hot store of the lowered loop nest (about 20 ms a row
with the lowering); ``combined`` is decision and loop-nest features side by side.
"""

from __future__ import annotations

from typing import Any

from tuner.cost_model.base import CostModelError
from tuner.cost_model.features.base import FeatureExtractor
from tuner.cost_model.features.combined import CombinedFeatures
from tuner.cost_model.features.decision import DecisionFeatures
from tuner.cost_model.features.loop_nest import LoopNestFeatures, function_features
from tuner.cost_model.features.program import ProgramFeatures, program_features


def _combined() -> CombinedFeatures:
    return CombinedFeatures([DecisionFeatures(), LoopNestFeatures()])


KINDS = {
    "decision": DecisionFeatures,
    "loop_nest": LoopNestFeatures,
    "program": ProgramFeatures,
    "combined": _combined,
}


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
    "ProgramFeatures",
    "create",
    "function_features",
    "program_features",
]
