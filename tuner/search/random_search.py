"""Random search: configs uniformly at random, none twice. The baseline every other
strategy must beat."""

from __future__ import annotations

from collections.abc import Iterator

from tuner.search.base import SearchStrategy
from tuner.space.base import Config


class RandomSearch(SearchStrategy):
    def _propose(self, count: int) -> Iterator[Config]:
        return self.random_unvisited()
