"""``tuner.tune_tir``: a schedule function tuned with the real local workers into a
SQLite database; its best trace replays when the workload is built with the
database, the same call resumes without measuring a trace twice, and a space that
names nothing usable is a SpaceError saying what to give instead."""

from __future__ import annotations

import numpy as np
import pytest
from schedule_fns import tile_matmul_relu
from searched_traces import searched_traces
from workloads import mm_relu

import compiler
import tuner
from compiler.tuned.lookup import apply_best
from db import Database
from tuner.search import SearchError
from tuner.space import SpaceError
from tuner.tune import TuneResult
from workers import Workers

M, N, K = 16, 24, 8
# j (24) tiled in two with an inner factor of at most 8: six points.
POINTS = 6


def _tune(database: Database, backend: Workers, trials: int) -> TuneResult:
    return tuner.tune_tir(
        mm_relu(M, N, K),
        space=tile_matmul_relu,
        trials=trials,
        database=database,
        workers=backend,
        seed=1,
        batch_size=2,
    )


def test_a_schedule_function_tunes_and_its_best_replays_at_build_time(database, backend, rng):
    result = _tune(database, backend, trials=4)
    assert (result.measured, result.errors, result.stop_reason) == (4, 0, "budget")
    assert result.space == "schedule function tile_matmul_relu"
    assert searched_traces(database, result.task) == 4
    best = database.best_trace(result.task.workload_key, result.task.target)
    assert best is not None and best == result.best[0].trace

    func = mm_relu(M, N, K)
    _, report = apply_best(compiler.IRModule({"main": func}), "llvm", database)
    assert report.tuned == ["main"]
    kernel = compiler.build(func, database=database)
    a = rng.standard_normal((M, K), dtype=np.float32)
    b = rng.standard_normal((K, N), dtype=np.float32)
    c = np.zeros((M, N), dtype=np.float32)
    kernel(a, b, c)
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-5, atol=1e-5)


def test_the_same_call_resumes_and_measures_no_trace_twice(database, backend):
    first = _tune(database, backend, trials=4)
    again = _tune(database, backend, trials=4)
    assert (again.measured, again.restored) == (0, first.measured)
    more = _tune(database, backend, trials=POINTS + 2)
    # the first call measured the default schedule and 3 points of the space
    assert (more.measured, more.restored, more.stop_reason) == (3, 4, "space exhausted")
    assert searched_traces(database, more.task) == POINTS + 1


@pytest.mark.parametrize(
    ("space", "message"),
    [
        ("nope", "neither auto nor template nor generated nor a schedule function"),
        (":tile", 'named "module:function"'),
        ("no_such_module_here:f", "cannot import 'no_such_module_here'"),
        ("schedule_fns:missing", "module 'schedule_fns' has no 'missing'"),
        ("schedule_fns:NOT_A_FUNCTION", "is 'int', not a schedule function"),
        ("schedule_fns:tile_matmul", "does not schedule this workload"),
        ("template", "no registered template fits"),
    ],
)
def test_a_space_that_names_nothing_usable_is_a_space_error(space, message, database):
    with pytest.raises(SpaceError, match=message):
        tuner.tune_tir(mm_relu(M, N, K), space=space, trials=1, database=database)


def test_a_search_that_cannot_search_the_space_fails_before_anything_starts(database):
    with pytest.raises(SearchError, match="grid search needs a space that numbers its points"):
        tuner.tune_tir(mm_relu(M, N, K), space=tile_matmul_relu, tuner="grid", database=database)
    assert database.workloads() == []
