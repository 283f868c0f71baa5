"""Program features: one fixed-width row per scheduled program, read from its stores,
that rank real measurements (the recorded fixture) well enough to steer a search."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
from replay_measurements import (
    Replay,
    run,
    small_matmul,
    small_space,
    sometimes_illegal_space,
    synthetic_seconds,
)
from tuning_fixture import pooled_pair_accuracy, recorded_workloads

from compiler import te
from compiler.ir.function import PrimFunc
from compiler.schedule import Schedule
from tuner import search
from tuner import space as spaces
from tuner.cost_model import features
from tuner.cost_model.features import program
from tuner.cost_model.features.program import FEATURE_NAMES, WIDTH, program_features
from tuner.search.model_guided import default_model, log_targets
from tuner.space import Decisions

COLUMN = {name: k for k, name in enumerate(FEATURE_NAMES)}
TRAIN_SHARE = 0.7
# Held-out pairwise accuracy the model must reach on the fixture: 0.834 measured with
# the search's default model (matmul 0.81, conv2d 0.86; 0.868 over ten random splits).
# On a recording whose convolution times were disturbed (0.78 of their pairs ordered
# as a careful re-timing orders them) an earlier model reached 0.773: the fixture's
# times are now re-timed with care.
MIN_ACCURACY = 0.8


def _value(row: np.ndarray, name: str) -> float:
    """A feature in its raw unit (the row holds log2(1 + x)), to six places."""
    return round(float(np.exp2(row[COLUMN[name]]) - 1), 6)


def test_rows_have_the_fixed_width_and_nan_for_illegal_points() -> None:
    space = sometimes_illegal_space()
    rows = features.create("program").transform(
        space, [space.decisions_at(0), space.decisions_at(1)]
    )
    assert rows.shape == (2, WIDTH) == (2, len(FEATURE_NAMES))
    assert np.isfinite(rows[0]).all()
    assert np.isnan(rows[1]).all()


def test_identical_programs_give_identical_rows() -> None:
    space, again = small_space(), small_space()
    points = [space.decisions_at(k) for k in (5, 200, 5)]
    rows = features.create("program").transform(space, points)
    fresh = features.create("program").transform(again, points)
    np.testing.assert_array_equal(rows, fresh)
    np.testing.assert_array_equal(rows[0], rows[2])
    assert not np.array_equal(rows[0], rows[1])
    scheduled = space.program(space.candidate(points[1])).func
    np.testing.assert_array_equal(program_features(scheduled), rows[1])


def test_a_new_extractor_reuses_the_rows_of_the_last_on_the_same_target(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A model's tuning makes a search, and so an extractor, every round: the rows of
    the points it learns from again are not computed again, unless the target differs."""
    monkeypatch.setattr(program, "_rows", OrderedDict())
    computed = []

    def counted(func: PrimFunc) -> np.ndarray:
        computed.append(func)
        return program_features(func)

    monkeypatch.setattr(program, "program_features", counted)
    base = small_space()
    space, other = (
        spaces.create("template", func=base.func, template=base.template, target=target)
        for target in ("llvm -mcpu=znver4 -num-cores=2", "llvm -mcpu=znver3 -num-cores=2")
    )
    points = [space.decisions_at(k) for k in (3, 50, 200)]
    first = features.create("program").transform(space, points)
    assert len(computed) == 3
    again = features.create("program").transform(space, points)
    assert len(computed) == 3
    np.testing.assert_array_equal(first, again)
    features.create("program").transform(other, [other.decisions_at(3)])
    assert len(computed) == 4


def test_vectorized_and_parallel_loops_show_in_the_row() -> None:
    space = small_space()
    first = space.decisions_at(0).values
    plain, vectorized = (
        Decisions(0, (first[0], (4, 8), first[2], vectorize, first[4])) for vectorize in (0, 1)
    )
    rows = features.create("program").transform(space, [plain, vectorized])
    assert _value(rows[0], "hot.vectorized_extent") == 0
    assert _value(rows[1], "hot.vectorized_extent") == 8
    assert _value(rows[1], "hot.vectorized_position") == 1  # the innermost loop

    sch = Schedule(small_matmul(24, 32, 8))
    outer = sch.get_loops(sch.get_block("C"))[0]
    before = program_features(sch.mod["main"])
    sch.parallel(outer)
    after = program_features(sch.mod["main"])
    assert _value(before, "hot.parallel_extent") == 0
    assert _value(after, "hot.parallel_extent") == 24
    assert _value(after, "hot.parallel_position") == 3  # the outermost of three loops
    changed = {FEATURE_NAMES[k] for k in np.flatnonzero(before != after)}
    assert {name.split(".", 1)[1] for name in changed} == {
        "parallel_extent",
        "parallel_loops",
        "parallel_position",
    }


def _elementwise() -> PrimFunc:
    """Per element: 2 adds/subs, 2 muls, 1 div, 1 max, 1 exp, 1 compare, 1 select."""
    a = te.placeholder((16, 8), name="A")
    b = te.placeholder((16, 8), name="B")

    def body(i, j):  # type: ignore[no-untyped-def]
        scaled = te.exp(a[i, j] * 2.0 + b[i, j]) / (a[i, j] - 1.0)
        return te.if_then_else(b[i, j] > 0.0, te.max(scaled, b[i, j] * 0.5), 0.0)

    out = te.compute((16, 8), body, name="C")
    return te.create_prim_func([a, b, out])


def test_operations_are_counted_by_kind() -> None:
    row = program_features(_elementwise())
    elements = 16 * 8
    expected = {"addsub": 2, "mul": 2, "div": 1, "minmax": 1, "math": 1, "cmp": 1, "select": 1}
    for kind, count in expected.items():
        assert _value(row, f"hot.float_{kind}") == pytest.approx(count * elements), kind
    assert _value(row, "hot.int_mul") == 0
    assert _value(row, "hot.iterations") == elements
    assert _value(row, "hot.buffer0_bytes") == elements * 4
    assert _value(row, "hot.buffer1_unique_bytes") == elements * 4
    assert _value(row, "hot.buffer1_stride_innermost") == 1
    flops = 2 + 2 + 1 + 1 + 1
    assert _value(row, "hot.intensity_all") == pytest.approx(flops * elements / (3 * elements * 4))


def test_a_cache_write_allocation_has_the_size_of_its_tile() -> None:
    sch = Schedule(small_matmul(24, 32, 8))
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(i0, j0, k, i1, j1)
    local = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(local, j0)
    row = program_features(sch.mod["main"])
    assert _value(row, "allocations") == 1
    assert _value(row, "allocated_bytes") == 4 * 8 * 4
    assert _value(row, "hot.buffer0_local") == 1


def test_xgboost_on_program_features_ranks_held_out_records() -> None:
    """Trained on 70 % of each recorded workload (the model-based search's targets),
    the model orders the pairs of the other 30 % of successful measurements."""
    extractor = features.create("program")
    rng = np.random.default_rng(0)
    train_rows, train_targets, held_out = [], [], []
    for workload in recorded_workloads():
        rows = extractor.transform(workload.space, workload.points)
        order = rng.permutation(len(rows))
        cut = int(TRAIN_SHARE * len(rows))
        train, test = order[:cut], order[cut:]
        train_rows.append(rows[train])
        train_targets.append(log_targets(workload.throughputs[train]))
        ok = test[workload.throughputs[test] > 0]
        held_out.append((workload.name, rows[ok], workload.throughputs[ok]))
    model = default_model(extractor, seed=0)
    model.fit(np.concatenate(train_rows), np.concatenate(train_targets))
    accuracy = pooled_pair_accuracy(
        (name, model.predict(rows), throughputs) for name, rows, throughputs in held_out
    )
    print(f"program features, held-out pairwise ranking accuracy: {accuracy:.3f}")
    assert accuracy >= MIN_ACCURACY


def test_model_based_search_runs_on_program_features() -> None:
    space = small_space()
    strategy = search.create(
        "xgb", space=space, features="program", max_trials=24, batch_size=8, seed=0
    )
    replay = Replay(space, lambda candidate: synthetic_seconds(space, candidate))
    assert run(strategy, replay) == [8, 8, 8]
    assert isinstance(strategy, search.ModelBasedSearch)
    assert strategy._feature_width == WIDTH
