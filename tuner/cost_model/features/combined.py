"""Several extractors side by side: a row is their rows concatenated."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tuner.cost_model.features.base import FeatureExtractor
from tuner.space.base import Config, Space


class CombinedFeatures(FeatureExtractor):
    def __init__(self, parts: Sequence[FeatureExtractor]) -> None:
        self.parts = list(parts)

    def transform(self, space: Space, configs: Sequence[Config]) -> np.ndarray:
        return np.concatenate([p.transform(space, configs) for p in self.parts], axis=1)

    def transform_choices(self, space: Space, choices: np.ndarray) -> np.ndarray:
        return np.concatenate([p.transform_choices(space, choices) for p in self.parts], axis=1)
