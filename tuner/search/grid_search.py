"""Grid search: every point of an enumerable space in index order (the first decision
varying fastest). Finds the best of a small space for certain, given a budget as
large as the space; a space without an index (generated sketches) has no grid."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tuner.search.base import SearchError, SearchStrategy
from tuner.space.base import Decisions, EnumerableSpace, Space


class GridSearch(SearchStrategy):
    def __init__(self, space: Space, **options: Any) -> None:
        if not isinstance(space, EnumerableSpace):
            raise SearchError(
                f"grid search needs a space that numbers its points, and {space.name} does "
                "not; use random, ga or xgb"
            )
        super().__init__(space, **options)
        self.grid = space

    def _propose(self, count: int) -> Iterator[Decisions]:
        for decisions in self.grid.enumerate():
            if not self.is_visited(decisions):
                yield decisions
