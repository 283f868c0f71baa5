"""Builds started ahead of their measurement (``Workers.build_ahead``): each candidate
is built once, failures included, and no run starts before the builds ahead end."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from timeline_workers import (
    BUILD_FUNCTION,
    MEASURER,
    TESTS_FOLDER,
    TIMELINE_ENV,
    intervals,
)
from worker_candidates import TEST_CONFIG, illegal_candidate, kinds, matmul_candidate

import workers
from compiler.errors import ErrorKind
from workers import Workers


@pytest.fixture
def timeline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Workers, Path]]:
    """Local workers whose builds and runs log to a timeline file, and that file."""
    path = tmp_path / "timeline"
    monkeypatch.setenv(TIMELINE_ENV, str(path))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([TESTS_FOLDER, os.environ.get("PYTHONPATH", "")])
    )
    with workers.create(
        "local", max_workers=2, config=TEST_CONFIG, build_function=BUILD_FUNCTION, measurer=MEASURER
    ) as backend:
        yield backend, path


def test_a_batch_built_ahead_is_built_once_and_run_after_its_builds(
    timeline: tuple[Workers, Path],
) -> None:
    backend, path = timeline
    batch = [matmul_candidate(seed) for seed in range(4)] + [illegal_candidate()]
    backend.build_ahead(batch)
    runs = backend.measure(batch)
    assert kinds(runs) == [None] * 4 + [ErrorKind.BUILD_ERROR]
    steps = intervals(path)
    builds = [s for s in steps if s.step == "build"]
    assert len(builds) == len(batch)  # the failed build too was taken, not made again
    runs_timed = [s for s in steps if s.step == "run"]
    assert len(runs_timed) == 4
    assert min(run.start for run in runs_timed) >= max(build.end for build in builds)


def test_only_the_candidates_not_built_ahead_are_built_when_measured(
    timeline: tuple[Workers, Path],
) -> None:
    backend, path = timeline
    backend.build_ahead([matmul_candidate(0)])
    runs = backend.measure([matmul_candidate(0), matmul_candidate(1)])
    assert kinds(runs) == [None, None]
    assert len([s for s in intervals(path) if s.step == "build"]) == 2


def test_builds_ahead_that_are_never_measured_are_dropped_by_the_next(
    timeline: tuple[Workers, Path],
) -> None:
    backend, path = timeline
    backend.build_ahead([illegal_candidate()])
    backend.build_ahead([matmul_candidate(0)])
    (build,) = backend.build([illegal_candidate()])
    assert build.error_kind is ErrorKind.BUILD_ERROR
    assert len([s for s in intervals(path) if s.step == "build"]) == 3
