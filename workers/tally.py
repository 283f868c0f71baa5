"""What a backend's builders and runner have done, so a long tuning can say where its
time went: on a laptop a model's tuning is bound by its builds (LLVM at O3 takes most
of a candidate's 0.3-1.5 s), which more builder hosts speed up, and not by its
timings, which more hosts do not."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # workers.base holds a tally in its Workers
    from workers.base import BuildResult


@dataclass(frozen=True)
class WorkTotals:
    """Candidates built afresh (kept and ahead-made builds count once) and the seconds
    their builder processes spent on them, summed: with two builders, two such seconds
    pass in one second of wall time. Runs, and the wall seconds the runner took for
    them, its checks and cold starts included."""

    builds: int = 0
    build_seconds: float = 0.0
    runs: int = 0
    run_seconds: float = 0.0

    def text(self) -> str:
        """The totals for a person."""
        each = f" ({self.build_seconds / self.builds:.2f} s each)" if self.builds else ""
        return (
            f"{self.builds} builds took {self.build_seconds:.0f} builder-seconds{each}, "
            f"{self.runs} runs {self.run_seconds:.0f} s"
        )

    def __add__(self, other: WorkTotals) -> WorkTotals:
        return WorkTotals(
            self.builds + other.builds,
            self.build_seconds + other.build_seconds,
            self.runs + other.runs,
            self.run_seconds + other.run_seconds,
        )

    def __sub__(self, earlier: WorkTotals) -> WorkTotals:
        return WorkTotals(
            self.builds - earlier.builds,
            self.build_seconds - earlier.build_seconds,
            self.runs - earlier.runs,
            self.run_seconds - earlier.run_seconds,
        )


@dataclass
class WorkTally:
    """Running totals, added to from the thread that builds ahead as well."""

    _totals: WorkTotals = field(default_factory=WorkTotals)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add_builds(self, builds: Sequence[BuildResult]) -> None:
        self._add(WorkTotals(len(builds), sum(build.seconds for build in builds)))

    def add_runs(self, runs: int, seconds: float) -> None:
        self._add(WorkTotals(runs=runs, run_seconds=seconds))

    def _add(self, more: WorkTotals) -> None:
        with self._lock:
            self._totals = self._totals + more

    def totals(self) -> WorkTotals:
        with self._lock:
            return self._totals
