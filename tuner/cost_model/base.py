"""The cost model extension point, with scikit-learn's estimator contract.

``fit(X, y)`` learns from feature rows ``X`` and targets ``y`` (larger is faster)
and returns the model; ``predict(X)`` scores rows; ``save(path)`` and
``CostModel.load(path)`` keep a fitted model in a file. Constructors only store
their keyword arguments; what fitting learns ends in ``_``; randomness comes
from ``random_state``.
"""

from __future__ import annotations

import abc
from pathlib import Path
from typing import TypeVar

import numpy as np


class CostModelError(ValueError):
    """A model used wrongly: predicting before fitting, rows of the wrong width, an
    unknown kind, a file that is not a saved model."""


M = TypeVar("M", bound="CostModel")


class CostModel(abc.ABC):
    @abc.abstractmethod
    def fit(self: M, X: np.ndarray, y: np.ndarray) -> M:
        """Learn from rows ``X`` and targets ``y``; returns self."""

    @abc.abstractmethod
    def predict(self, X: np.ndarray) -> np.ndarray:
        """One score per row; a larger score means a faster config."""

    @abc.abstractmethod
    def save(self, path: str | Path) -> None:
        """Write the fitted model to ``path``."""

    @classmethod
    @abc.abstractmethod
    def load(cls: type[M], path: str | Path) -> M:
        """A model read from a file ``save`` wrote."""
