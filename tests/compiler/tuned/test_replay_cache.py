"""The per-process replay cache: one trace is replayed once on one workload, and its
scheduled and lowered program is what the space, the features, the database's
check and ``build(..., database=...)`` share."""

from __future__ import annotations

import traceback

import pytest
from replay_measurements import small_matmul, small_space

import compiler
import db
from compiler.ir.function import IRModule
from compiler.schedule import Schedule, ScheduleError
from compiler.tuned.lookup import apply_best
from compiler.tuned.replay import REPLAYS, ReplayCache
from compiler.workload.key import workload_key


def test_a_trace_is_replayed_once_and_its_lowering_made_once() -> None:
    cache = ReplayCache(size=4)
    func = small_matmul(8, 8, 4)
    sch = Schedule(func)
    sch.split(sch.get_loops(sch.get_block("C"))[0], [None, 4])
    first = cache.replayed(func, sch.trace)
    again = cache.replayed(func, sch.trace.to_json_string())
    assert again is first
    assert first.lowered is first.lowered
    assert cache.lowered(first.func) is first.lowered


def test_an_illegal_trace_raises_each_time_from_the_cache() -> None:
    cache = ReplayCache(size=4)
    sch = Schedule(small_matmul(8, 8, 4))
    i = sch.get_loops(sch.get_block("C"))[0]
    sch.split(i, sch.sample_perfect_tile(i, n=2, decision=[2, 4]))
    depths = []
    for _ in range(3):
        with pytest.raises(ScheduleError, match="product is 6") as raised:
            cache.replayed(small_matmul(6, 8, 4), sch.trace)
        depths.append(len(traceback.extract_tb(raised.value.__traceback__)))
    # Each raise carries only its own frames, not those of every earlier raise.
    assert depths[0] == depths[1] == depths[2]


def test_the_cache_is_bounded_least_recently_used_first() -> None:
    cache = ReplayCache(size=2)
    func = small_matmul(8, 8, 4)
    traces = []
    for factor in (2, 4, 8):
        sch = Schedule(func)
        sch.split(sch.get_loops(sch.get_block("C"))[0], [None, factor])
        traces.append(sch.trace)
    first = cache.replayed(func, traces[0])
    cache.replayed(func, traces[1])
    assert cache.replayed(func, traces[0]) is first  # now the most recent
    cache.replayed(func, traces[2])  # drops traces[1]
    assert cache.replayed(func, traces[0]) is first


def test_a_space_candidate_is_shared_with_the_database_build() -> None:
    """The space keeps the program it scheduled; ``build(..., database=...)`` of the same
    trace takes it from the cache instead of replaying."""
    space = small_space()
    candidate = space.candidate(space.decisions_at(42))
    program = space.program(candidate)
    key = workload_key(space.func)
    assert REPLAYS.replayed(space.func, candidate.trace_json, key=key) is program

    database = db.create("memory")
    database.commit_workload(space.func)
    database.commit_records([db.Measurement.ok(key, "llvm", candidate.trace_json, [1e-3])])
    mod, report = apply_best(IRModule({"main": space.func}), "llvm", database)
    assert report.tuned == ["main"] and mod["main"] is program.func
    assert REPLAYS.lowered(program.func) is program.lowered
    compiler.build(space.func, database=database)
