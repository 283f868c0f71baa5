"""The feature extraction extension point: points of a space in, a matrix out.

Each row describes one point (a design and its decisions) with a fixed number of
numbers, so a cost model trained on some points can score others. A row of NaN
marks a point whose features cannot be computed (its decisions are illegal);
XGBoost treats NaN as missing.
"""

from __future__ import annotations

import abc
import random
from collections.abc import Sequence

import numpy as np

from tuner.space.base import Decisions, Space


class FeatureExtractor(abc.ABC):
    """Turns points of a space into feature rows."""

    @abc.abstractmethod
    def transform(self, space: Space, points: Sequence[Decisions]) -> np.ndarray:
        """A float matrix with one row per point."""

    def width(self, space: Space) -> int:
        """The number of features in a row of ``space``'s points: here, a row made of
        one point; an extractor whose rows have a fixed width says so without that."""
        point = space.random_decisions(random.Random(0))
        return self.transform(space, [point]).shape[1]

    def transform_positions(self, space: Space, design: int, matrix: np.ndarray) -> np.ndarray:
        """Rows for points of design ``design`` given as an int matrix of positions into
        its decision domains (one point per row); the simulated annealing of the
        model-based search scores thousands of these, so extractors that can work on
        the matrix directly override this."""
        domains = space.decision_domains(design)
        points = [
            Decisions(design, tuple(d.values[p] for d, p in zip(domains, row, strict=True)))
            for row in matrix.tolist()
        ]
        return self.transform(space, points)
