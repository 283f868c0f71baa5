"""A builder and a measurer that log when each build and each run starts and ends, so
a test can show what ran beside what. The worker processes append to the file that
``TIMELINE_ENV`` names, one line per event: the step, "start" or "end", the process and
``time.monotonic()``, which is one clock for every process of a Linux machine."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from workers.base import BuildResult, Candidate, MeasureConfig, RunResult
from workers.compile_candidate import build_candidate
from workers.measure import Measurer

TIMELINE_ENV = "TENSORTUNE_TEST_TIMELINE"
BUILD_FUNCTION = "timeline_workers:logged_build"
MEASURER = "timeline_workers:LoggedMeasurer"
TESTS_FOLDER = str(Path(__file__).parent)


def log(step: str, event: str, path: str | None = None) -> None:
    """Append one event of ``step`` to the timeline (``path``, else ``TIMELINE_ENV``'s)."""
    with open(path or os.environ[TIMELINE_ENV], "a") as timeline:
        timeline.write(f"{step} {event} {os.getpid()} {time.monotonic()!r}\n")


def logged_build(candidate: Candidate) -> BuildResult:
    log("build", "start")
    try:
        return build_candidate(candidate)
    finally:
        log("build", "end")


class LoggedMeasurer(Measurer):
    def measure(self, build: BuildResult, config: MeasureConfig) -> RunResult:
        log("run", "start")
        try:
            return super().measure(build, config)
        finally:
            log("run", "end")


@dataclass(frozen=True)
class Interval:
    step: str
    start: float
    end: float

    def overlaps(self, other: Interval) -> bool:
        return self.start < other.end and other.start < self.end


def intervals(path: Path) -> list[Interval]:
    """The timeline's steps, each from its start to its end (a process runs one step at
    a time)."""
    found: list[Interval] = []
    started: dict[tuple[str, str], float] = {}
    for line in path.read_text().splitlines():
        step, event, process, stamp = line.split()
        if event == "start":
            started[step, process] = float(stamp)
        else:
            found.append(Interval(step, started.pop((step, process)), float(stamp)))
    return found
