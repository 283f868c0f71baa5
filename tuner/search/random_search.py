"""Random search: points uniformly at random, none twice. The baseline every other
strategy must beat."""

from __future__ import annotations

from collections.abc import Iterator

from tuner.search.base import SearchStrategy
from tuner.space.base import Decisions


class RandomSearch(SearchStrategy):
    def _propose(self, count: int) -> Iterator[Decisions]:
        return self.random_unvisited()
