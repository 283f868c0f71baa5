"""Cost models (scikit-learn's contract, over every registered kind) and features."""

from __future__ import annotations

import random

import numpy as np
import pytest
from replay_measurements import (
    small_space,
    small_trace_space,
    sometimes_illegal_space,
    synthetic_seconds,
)

from tuner import cost_model
from tuner.cost_model import CostModelError, features
from tuner.cost_model.features.loop_nest import WIDTH, function_features
from tuner.space import Decisions

MODEL_KINDS = sorted(cost_model.KINDS)


def _data(rng: np.random.Generator, rows: int = 200) -> tuple[np.ndarray, np.ndarray]:
    X = rng.random((rows, 6))
    y = 3 * X[:, 0] - 2 * (X[:, 1] - 0.5) ** 2 + 0.1 * rng.random(rows)
    return X, y


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_fit_returns_self_and_predicts_the_order(kind: str, rng: np.random.Generator) -> None:
    X, y = _data(rng)
    model = cost_model.create(kind, random_state=0)
    assert model.fit(X, y) is model
    X_new, y_new = _data(rng)
    assert np.corrcoef(model.predict(X_new), y_new)[0, 1] > 0.9


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_the_rank_objective_learns_the_order(kind: str, rng: np.random.Generator) -> None:
    X, y = _data(rng)
    model = cost_model.create(kind, objective="rank", random_state=0).fit(X, y)
    X_new, y_new = _data(rng)
    ranks = [np.argsort(np.argsort(v)) for v in (model.predict(X_new), y_new)]
    assert np.corrcoef(*ranks)[0, 1] > 0.85


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_unfitted_and_misshapen_uses_are_errors(kind: str, rng: np.random.Generator) -> None:
    model = cost_model.create(kind)
    with pytest.raises(CostModelError, match="not fitted"):
        model.predict(np.zeros((2, 6)))
    X, y = _data(rng, 20)
    with pytest.raises(CostModelError, match="as many targets"):
        model.fit(X, y[:5])
    with pytest.raises(CostModelError, match="finite"):
        model.fit(X, np.full(20, np.nan))
    model.fit(X, y)
    assert model.n_features_in_ == 6  # type: ignore[attr-defined]
    with pytest.raises(CostModelError, match="fitted on 6"):
        model.predict(np.zeros((2, 5)))


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_save_and_load_give_the_same_predictions(
    kind: str, rng: np.random.Generator, tmp_path
) -> None:
    X, y = _data(rng)
    model = cost_model.create(kind, random_state=3, max_depth=4, colsample_bytree=0.5).fit(X, y)
    path = tmp_path / "model.json"
    model.save(path)
    loaded = type(model).load(path)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    assert loaded.max_depth == 4  # type: ignore[attr-defined]
    assert loaded.colsample_bytree == 0.5  # type: ignore[attr-defined]
    path.write_text("{}")
    with pytest.raises(CostModelError, match="not a model saved"):
        type(model).load(path)


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_random_state_makes_fitting_reproducible(kind: str, rng: np.random.Generator) -> None:
    X, y = _data(rng)

    def fitted(seed: int) -> np.ndarray:
        options = {"subsample": 0.7, "colsample_bytree": 0.5}
        return cost_model.create(kind, random_state=seed, **options).fit(X, y).predict(X)

    np.testing.assert_array_equal(fitted(1), fitted(1))
    assert not np.array_equal(fitted(1), fitted(2))


def test_create_lists_the_kinds() -> None:
    with pytest.raises(CostModelError, match=r"\['xgb'\]"):
        cost_model.create("mlp")
    with pytest.raises(CostModelError, match="combined"):
        features.create("tensorir")


def test_decision_features_read_the_decision_values() -> None:
    space = small_space()
    point = space.decisions_at(200)
    row = features.create("decision").transform(space, [point])[0]
    described = space.describe(space.candidate(point))
    expected = [
        *np.log2(described["tile_i"]),
        *np.log2(described["tile_j"]),
        float(point.values[2]),  # the position of the chosen order
        float(described["vectorize"]),
        float(described["unroll"]),
    ]
    np.testing.assert_allclose(row, expected)
    other = space.decisions_at(3)
    domains = space.decision_domains(0)
    positions = np.array(
        [[d.position(v) for d, v in zip(domains, p.values, strict=True)] for p in (point, other)]
    )
    extractor = features.create("decision")
    np.testing.assert_array_equal(
        extractor.transform_positions(space, 0, positions),
        extractor.transform(space, [point, other]),
    )


def test_decision_features_work_for_a_trace_space() -> None:
    space = small_trace_space()
    point = space.sample(random.Random(0)).decisions
    row = features.create("decision").transform(space, [point])[0]
    tile_i, tile_j, flag = point.values
    np.testing.assert_allclose(row, [*np.log2(tile_i), *np.log2(tile_j), float(flag)])


def test_loop_nest_features_see_vectors_and_tiles() -> None:
    space = small_space()
    first = space.decisions_at(0).values
    by_name = {
        vectorize: Decisions(0, (first[0], (4, 8), first[2], int(vectorize), first[4]))
        for vectorize in (False, True)
    }
    rows = features.create("loop_nest").transform(space, [by_name[False], by_name[True]])
    assert rows.shape == (2, WIDTH)
    assert np.isfinite(rows).all()
    vector_length = 3  # position of log2 of the vectorized extent in the row
    assert rows[0, vector_length] == 0.0 and rows[1, vector_length] == 3.0


def test_loop_nest_features_mark_illegal_points_missing() -> None:
    space = sometimes_illegal_space()
    rows = features.create("loop_nest").transform(
        space, [space.decisions_at(0), space.decisions_at(1)]
    )
    assert np.isfinite(rows[0]).all()
    assert np.isnan(rows[1]).all()


def test_loop_nest_features_compare_across_workloads() -> None:
    """A trace replayed on another shape gives a row of the same width (transfer)."""
    small, large = small_space(24, 32, 8), small_space(48, 64, 8)
    row_small = function_features(small.program(small.candidate(small.decisions_at(100))).func)
    row_large = features.create("loop_nest").transform(large, [large.decisions_at(100)])[0]
    assert row_small.shape == row_large.shape == (WIDTH,)
    assert row_large[0] > row_small[0]  # log2 of the hot store's iterations


def test_combined_features_learn_the_replayed_costs() -> None:
    space = small_space()
    points = list(space.enumerate())[::2]
    seconds = np.array([synthetic_seconds(space, space.candidate(p)) or 1.0 for p in points])
    extractor = features.create("combined")
    X = extractor.transform(space, points)
    model = cost_model.create("xgb").fit(X[::2], -np.log(seconds[::2]))
    predicted = model.predict(X[1::2])
    assert np.corrcoef(predicted, -np.log(seconds[1::2]))[0, 1] > 0.8


@pytest.mark.parametrize("kind", sorted(features.KINDS))
def test_every_extractor_states_the_width_of_its_rows(kind: str) -> None:
    """A search checks transfer rows against ``width``; ProgramFeatures states it
    without making a point's candidate, the others measure a row."""
    space = sometimes_illegal_space()
    extractor = features.create(kind)
    rows = extractor.transform(space, [space.decisions_at(0), space.decisions_at(1)])
    assert extractor.width(space) == rows.shape[1]
