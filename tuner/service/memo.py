"""Values computed once per key and kept, so that a route read thousands of times a
second does not ask the database, or render, each time: forever for what never
changes once stored (a workload by its key, a record by its id; both are only ever
inserted), for a moment for what changes now and then."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Memo(Generic[K, V]):
    """At most ``size`` values, all dropped when it is full (simpler than an LRU and as
    good where the working set fits). Threads may share it: a race computes a value
    twice, never a wrong one."""

    def __init__(self, size: int = 10_000) -> None:
        self.size = size
        self._kept: dict[K, V] = {}

    def get(self, key: K, compute: Callable[[], V]) -> V:
        """The value of ``key``, computed by ``compute`` the first time; an exception
        of ``compute`` is raised and nothing is kept."""
        try:
            return self._kept[key]
        except KeyError:
            pass
        value = compute()
        if len(self._kept) >= self.size:
            self._kept.clear()
        self._kept[key] = value
        return value


class RecentMemo(Generic[K, V]):
    """Values kept for ``seconds`` after they were computed: for answers that may be a
    little behind the database (the best schedules of a workload, while a tuning run
    adds to them every few seconds) but are asked for far more often than they change."""

    def __init__(self, seconds: float, size: int = 10_000) -> None:
        self.seconds = seconds
        self.size = size
        self._kept: dict[K, tuple[float, V]] = {}

    def fresh(self, key: K) -> V | None:
        """The value of ``key`` if it was computed less than ``seconds`` ago, else None
        (so that an async caller can answer at once when it may, and go to a thread to
        compute otherwise)."""
        kept = self._kept.get(key)
        if kept is not None and time.monotonic() - kept[0] < self.seconds:
            return kept[1]
        return None

    def get(
        self, key: K, compute: Callable[[], V], *, keep: Callable[[V], bool] | None = None
    ) -> V:
        """The value of ``key`` if it was computed less than ``seconds`` ago, else
        computed now by ``compute`` and kept unless ``keep`` says no. While one caller
        recomputes an expired value, the others get the old one (so that a value asked
        for by many at once is not computed by all of them when it expires); when
        ``compute`` raises, nothing is kept."""
        now = time.monotonic()
        kept = self._kept.get(key)
        if kept is not None:
            if now - kept[0] < self.seconds:
                return kept[1]
            self._kept[key] = (now, kept[1])
        try:
            value = compute()
        except BaseException:
            self._kept.pop(key, None)
            raise
        if keep is None or keep(value):
            if len(self._kept) >= self.size:
                self._kept.clear()
            self._kept[key] = (now, value)
        else:
            self._kept.pop(key, None)
        return value
