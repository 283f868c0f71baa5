"""The successful builds a backend keeps, so that a candidate measured again soon
is not built again: a search confirms its fastest trials right after measuring
them, and a model's tuning re-times each task's finalists once its search ends.

Builds are kept by what they were built from (workload and spec, trace, target),
the least recently used dropped once their libraries pass ``max_bytes``. A
ResNet-18 candidate's library is 14-39 kB, so the default keeps the builds of a
2,000-trial tuning of it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # workers.base holds the cache in its Workers
    from workers.base import BuildResult, Candidate

KEPT_BUILD_BYTES = 64 << 20

BuildKey = tuple[str, str, str]


class BuildCache:
    """Successful builds up to ``max_bytes`` of libraries; safe to share between
    threads (a service's coordinators share one backend)."""

    def __init__(self, max_bytes: int = KEPT_BUILD_BYTES) -> None:
        self.max_bytes = max_bytes
        self._builds: OrderedDict[BuildKey, BuildResult] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, candidate: Candidate) -> BuildResult | None:
        """The kept build of what ``candidate`` is built from, as ``candidate``'s and
        taking no build time; None when none is kept."""
        key = build_key(candidate)
        with self._lock:
            kept = self._builds.get(key)
            if kept is None:
                return None
            self._builds.move_to_end(key)
        return replace(kept, candidate=candidate, seconds=0.0)

    def put(self, build: BuildResult) -> None:
        """Keep ``build`` when it succeeded."""
        if build.artifact is None:
            return
        key = build_key(build.candidate)
        with self._lock:
            old = self._builds.pop(key, None)
            if old is not None:
                self._bytes -= _size(old)
            self._builds[key] = build
            self._bytes += _size(build)
            while self._bytes > self.max_bytes and self._builds:
                _, dropped = self._builds.popitem(last=False)
                self._bytes -= _size(dropped)

    def __len__(self) -> int:
        return len(self._builds)


def build_key(candidate: Candidate) -> BuildKey:
    """What a build depends on: the workload (and spec), the trace and the target."""
    return (candidate.reference_key, candidate.trace, candidate.target)


def _size(build: BuildResult) -> int:
    return 0 if build.artifact is None else len(build.artifact.library)
