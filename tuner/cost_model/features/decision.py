"""Features from the decisions themselves: each sampling instruction's decision as
numbers.

A tile reads as the log2 of its factors, a categorical choice as the candidate it
picks (a template's plain int knob as its value, any other knob as its entity's
position), a compute location as its index. The row is the concatenation over
the design's sampling instructions, so two spaces of one design on workloads of
different sizes (a template on two matmul shapes) give rows of the same meaning:
records of one warm-start the model of the other. A space of several designs
pads the rows to one width and adds the design's number as the last column.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from tuner.cost_model.features.base import FeatureExtractor
from tuner.space.base import Decisions, Domain, Space, positions


class DecisionFeatures(FeatureExtractor):
    """Features of a point by table lookup: microseconds a row, for any space."""

    def __init__(self) -> None:
        self._tables: weakref.WeakKeyDictionary[Space, dict[int, list[np.ndarray]]] = (
            weakref.WeakKeyDictionary()
        )

    def transform(self, space: Space, points: Sequence[Decisions]) -> np.ndarray:
        rows = np.zeros((len(points), self._width(space)))
        for design in sorted({p.design for p in points}):
            chosen = [k for k, p in enumerate(points) if p.design == design]
            domains = space.decision_domains(design)
            rows_of = [positions(domains, points[k].values) for k in chosen]
            matrix = np.array(rows_of, dtype=np.int64).reshape(len(chosen), len(domains))
            rows[chosen] = self.transform_positions(space, design, matrix)
        return rows

    def transform_positions(self, space: Space, design: int, matrix: np.ndarray) -> np.ndarray:
        tables = self._tables_of(space, design)
        columns = [table[matrix[:, k]] for k, table in enumerate(tables)]
        rows = np.concatenate(columns, axis=1) if columns else np.zeros((len(matrix), 0))
        width = self._width(space)
        designs = space.design_count
        padded = np.zeros((len(matrix), width))
        padded[:, : rows.shape[1]] = rows
        if designs > 1:
            padded[:, -1] = design
        return padded

    def _width(self, space: Space) -> int:
        designs = space.design_count
        widths = [sum(t.shape[1] for t in self._tables_of(space, d)) for d in range(designs)]
        return max(widths) + (1 if designs > 1 else 0)

    def _tables_of(self, space: Space, design: int) -> list[np.ndarray]:
        tables = self._tables.setdefault(space, {})
        if design not in tables:
            domains = space.decision_domains(design)
            tables[design] = [
                np.array([_value_features(d, v) for v in d.values], dtype=float) for d in domains
            ]
        return tables[design]


def _value_features(domain: Domain, value: Any) -> list[float]:
    if domain.kind == "sample_perfect_tile":
        return [math.log2(f) for f in value]
    if domain.kind == "sample_categorical":
        return [float(domain.candidates[value])]
    return [float(value)]
