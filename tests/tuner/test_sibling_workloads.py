"""Sibling workloads: one operator under different elementwise epilogues (a dense layer
with and without its ReLU, a ResNet's convolution with and without the residual add)
has spaces with the same points. Their spaces say so, transfer hands a task its
siblings' records first, a model's tuning names each task's siblings, and the
evolutionary search starts from a sibling's fastest points without replaying a random
population."""

from __future__ import annotations

import random

import numpy as np
import pytest
from onnx_models import make_model, node, weight
from replay_measurements import counting_replays

from compiler.graph import import_onnx
from compiler.schedule import ScheduleError
from compiler.workload.spec import workload_from_spec
from db import Measurement
from tuner import model_tune, search
from tuner import space as spaces
from tuner.model_tasks import extract_tasks
from tuner.model_tune import ModelTuneOptions, tune_model
from tuner.search import evolutionary
from tuner.space import Decisions, Space, TraceCandidate
from tuner.space.generated import GeneratedSpace
from tuner.task import TuneTask
from tuner.transfer import similar_workloads


def dense(**args: object) -> dict[str, object]:
    return {"op": "dense", "args": {"batch": 16, "in_features": 32, "out_features": 48, **args}}


def generated(spec: dict[str, object]) -> GeneratedSpace:
    return GeneratedSpace(workload_from_spec(spec))


def test_one_operator_under_other_epilogues_has_the_same_points() -> None:
    relu = generated(dense(activation="relu"))
    for sibling in (dense(), dense(activation="gelu"), dense(bias=False, activation="relu")):
        other = generated(sibling)
        assert other.workload_key != relu.workload_key
        assert relu.shares_points_with(other) and other.shares_points_with(relu)
    assert not relu.shares_points_with(generated(dense(out_features=64, activation="relu")))
    matmul = {"op": "matmul", "args": {"m": 16, "n": 48, "k": 32}}
    template = TuneTask.from_spec(matmul)
    knobs = spaces.space_for(template.func, target=template.target)
    assert not relu.shares_points_with(knobs) and not knobs.shares_points_with(relu)


def legal_records(space: Space, count: int, seed: int) -> list[TraceCandidate]:
    """``count`` distinct legal random candidates of ``space``."""
    rng = random.Random(seed)
    made: dict[str, TraceCandidate] = {}
    while len(made) < count:
        try:
            candidate = space.candidate(space.random_decisions(rng))
        except ScheduleError:
            continue
        made[candidate.trace_hash] = candidate
    return list(made.values())


def test_transfer_offers_the_siblings_records_first_and_once(database) -> None:
    task = TuneTask.from_spec(dense(activation="relu"))
    sibling = generated(dense())
    newer = [generated(dense(out_features=n)) for n in (8, 16)]
    for space in (sibling, *newer):  # the sibling is the oldest stored workload
        database.commit_workload(space.func)
        database.commit_records(
            Measurement.ok(space.workload_key, task.target, c.trace_json, [1e-4])
            for c in legal_records(space, 3, seed=1)
        )
    space = generated(dense(activation="relu"))
    found = list(similar_workloads(database, task, space, siblings=[sibling], max_workloads=1))
    assert [f.space.workload_key for f in found] == [sibling.workload_key, newer[-1].workload_key]
    assert all(len(f.records) == 3 for f in found)
    alone = list(similar_workloads(database, task, space, max_workloads=1))
    assert [f.space.workload_key for f in alone] == [newer[-1].workload_key]


def distance_seconds(point: Decisions, hidden: Decisions) -> float:
    """A time that grows with the decisions that differ from ``hidden``."""
    if point.design != hidden.design:
        return 1e-3
    return 1e-4 * (1 + sum(a != b for a, b in zip(point.values, hidden.values, strict=True)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_search_starts_from_its_siblings_fastest_point(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    sibling = generated(dense())
    records = legal_records(sibling, 40, seed)
    hidden = records[seed].decisions
    space = generated(dense(activation="relu"))
    strategy = search.create("evolutionary", space=space, max_trials=64, batch_size=8, seed=seed)
    taken = strategy.learn_from(
        sibling, [(c.trace_json, distance_seconds(c.decisions, hidden)) for c in records]
    )
    assert taken == len(records)
    replayed = counting_replays(space, monkeypatch)
    batch = strategy.generate_measure_candidates()
    assert batch is not None and len(batch) == 8
    assert hidden in {c.decisions for c in batch}
    # The shortlist and the batch only: no random population replayed for the model.
    assert len(replayed) <= (evolutionary.SHORTLIST_PER_CANDIDATE + 1) * 8, len(replayed)


def two_dense_layers(rng: np.random.Generator):
    """Two 32x32 Gemms with biases, a ReLU after the first only: sibling tasks."""
    nodes = [
        node("Gemm", ["x", "w1", "b1"], ["h"], transB=1),
        node("Relu", ["h"], ["a"]),
        node("Gemm", ["a", "w2", "b2"], ["y"], transB=1),
    ]
    weights = {
        "w1": weight(rng, 32, 32),
        "b1": weight(rng, 32, fan_in=32),
        "w2": weight(rng, 32, 32),
        "b2": weight(rng, 32, fan_in=32),
    }
    return make_model(nodes, {"x": [4, 32]}, ["y"], weights, opset=13)


def test_a_models_tuning_hands_each_task_its_siblings(rng, database, backend, monkeypatch):
    """Once both have had a round: a task's space is made for its first round, and a
    task without one has no records to learn from."""
    tasks = [t for t in extract_tasks(import_onnx(two_dense_layers(rng))) if t.worth_tuning]
    assert len(tasks) == 2
    given: list[tuple[str, list[str]]] = []
    real_start = model_tune.start_tuning

    def start_noting_siblings(task: TuneTask, **options: object):
        siblings = options["siblings"]
        assert isinstance(siblings, list)
        given.append((task.workload_key, [space.workload_key for space in siblings]))
        return real_start(task, **options)

    monkeypatch.setattr(model_tune, "start_tuning", start_noting_siblings)
    options = ModelTuneOptions(trials=12, round_trials=4, retime_top=0)
    tune_model(tasks, database=database, workers=backend, options=options)
    first, second = (t.task.workload_key for t in tasks)
    assert given[:2] == [(first, []), (second, [first])]
    assert len(given) == 3
    third, siblings = given[2]
    assert siblings == [second if third == first else first]
