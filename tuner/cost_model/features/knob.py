"""Features from the config itself: each knob's chosen entity as numbers.

Split factors read as their log2, a reorder as the position of each loop, an
annotation as a code, a plain knob as its value (see ``tuner.space.knobs``). The
row is the concatenation over knobs, so two spaces of one template on workloads
of different sizes give rows of the same meaning: records of one warm-start the
model of the other.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import numpy as np

from tuner.cost_model.base import CostModelError
from tuner.cost_model.features.base import FeatureExtractor
from tuner.space.base import Config, Space


class KnobFeatures(FeatureExtractor):
    """Features of a ``TemplateSpace`` config, by table lookup: microseconds a row."""

    def __init__(self) -> None:
        self._tables: weakref.WeakKeyDictionary[Space, list[np.ndarray]] = (
            weakref.WeakKeyDictionary()
        )

    def transform(self, space: Space, configs: Sequence[Config]) -> np.ndarray:
        choices = np.array([c.choices for c in configs], dtype=np.int64)
        return self.transform_choices(space, choices.reshape(len(configs), len(space.dims)))

    def transform_choices(self, space: Space, choices: np.ndarray) -> np.ndarray:
        tables = self._tables_of(space)
        columns = [table[choices[:, k]] for k, table in enumerate(tables)]
        return np.concatenate(columns, axis=1) if columns else np.zeros((len(choices), 0))

    def _tables_of(self, space: Space) -> list[np.ndarray]:
        if space not in self._tables:
            knobs = getattr(space, "knobs", None)
            if knobs is None:
                raise CostModelError(
                    f"knob features need a space with knobs (a TemplateSpace), not {space!r}"
                )
            self._tables[space] = [knob.features() for knob in knobs]
        return self._tables[space]
