"""Builds started ahead of their measurement, in a background thread, so that the
tuner can search for the next batch while this one builds. A model's tuning searches
in its own process, one core, while the builder processes wait; on 2 cores that left
one idle for the search's whole time.

Measuring stays alone: ``Workers.build`` (and so ``Workers.measure``) waits for the
builds ahead before anything runs, so no timing shares the machine with a build."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from workers.build_cache import BuildKey, build_key

if TYPE_CHECKING:  # workers.base holds these builds in its Workers
    from workers.base import BuildResult, Candidate

BuildFunction = Callable[[Sequence["Candidate"]], list["BuildResult"]]


class BuildsAhead:
    """One batch building in the background at a time, and its builds until taken."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._builds: dict[BuildKey, BuildResult] = {}

    def start(self, build: BuildFunction, candidates: Sequence[Candidate]) -> None:
        """Call ``build(candidates)`` in a background thread and return at once. The
        builds of an earlier start that were not taken are dropped."""
        self.wait()
        self._builds.clear()
        self._thread = threading.Thread(
            target=self._build, args=(build, list(candidates)), name="build-ahead", daemon=True
        )
        self._thread.start()

    def wait(self) -> None:
        """Return once the batch in flight (if any) is built; raise what stopped it."""
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
        error, self._error = self._error, None
        if error is not None:
            raise error

    def take(self, candidate: Candidate) -> BuildResult | None:
        """The build made ahead of ``candidate`` (failed or not), as ``candidate``'s,
        once; None when there is none. Call after ``wait``."""
        built = self._builds.pop(build_key(candidate), None)
        return None if built is None else replace(built, candidate=candidate)

    def _build(self, build: BuildFunction, candidates: list[Candidate]) -> None:
        try:
            results = build(candidates)
        except BaseException as err:  # raised again in the caller's thread, by ``wait``
            self._error = err
            return
        self._builds.update((build_key(result.candidate), result) for result in results)
