"""Grid search: every config in index order (the first knob varies fastest). Finds
the best of a small space for certain, given a budget as large as the space."""

from __future__ import annotations

from collections.abc import Iterator

from tuner.search.base import SearchStrategy
from tuner.space.base import Config


class GridSearch(SearchStrategy):
    def _propose(self, count: int) -> Iterator[Config]:
        for index in range(self.space.size):
            config = self.space.config(index)
            if not self.is_visited(config):
                yield config
