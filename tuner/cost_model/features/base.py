"""The feature extraction extension point: configs of a space in, a matrix out.

Each row describes one config with a fixed number of numbers, so a cost model
trained on some configs can score others. A row of NaN marks a config whose
features cannot be computed (its schedule is illegal); XGBoost treats NaN as
missing.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence

import numpy as np

from tuner.space.base import Config, Space


class FeatureExtractor(abc.ABC):
    """Turns configs of a space into feature rows."""

    @abc.abstractmethod
    def transform(self, space: Space, configs: Sequence[Config]) -> np.ndarray:
        """A float matrix with one row per config."""

    def transform_choices(self, space: Space, choices: np.ndarray) -> np.ndarray:
        """Rows for configs given as an int matrix of knob choices (one config per
        row); the simulated annealing of the model-based search scores thousands of
        these, so extractors that can work on the matrix directly override this."""
        return self.transform(space, [space.config_of(list(row)) for row in choices])
