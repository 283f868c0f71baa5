"""The workers' tally counts fresh builds once, whichever thread made them."""

from __future__ import annotations

import threading

from workers.base import BuildResult, Candidate, ErrorKind
from workers.tally import WorkTally, WorkTotals


def failed_build(seconds: float) -> BuildResult:
    return BuildResult.failed(Candidate("{}", "{}"), ErrorKind.BUILD_ERROR, "refused", seconds)


def test_builds_added_from_many_threads_are_all_counted() -> None:
    tally = WorkTally()
    before = tally.totals()

    def add() -> None:
        for _ in range(1000):
            tally.add_builds([failed_build(0.5), failed_build(0.25)])
            tally.add_runs(3, 0.125)

    threads = [threading.Thread(target=add) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert tally.totals() - before == WorkTotals(8000, 3000.0, 12000, 500.0)
