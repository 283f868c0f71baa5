"""Several extractors side by side: a row is their rows concatenated."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tuner.cost_model.features.base import FeatureExtractor
from tuner.space.base import Decisions, Space


class CombinedFeatures(FeatureExtractor):
    def __init__(self, parts: Sequence[FeatureExtractor]) -> None:
        self.parts = list(parts)

    def transform(self, space: Space, points: Sequence[Decisions]) -> np.ndarray:
        return np.concatenate([p.transform(space, points) for p in self.parts], axis=1)

    def transform_positions(self, space: Space, design: int, matrix: np.ndarray) -> np.ndarray:
        return np.concatenate(
            [p.transform_positions(space, design, matrix) for p in self.parts], axis=1
        )
