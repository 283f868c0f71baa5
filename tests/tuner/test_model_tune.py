"""Whole models: task extraction, one budget shared by the tasks with real local
workers and SQLite, resumption, and the tuned model against onnxruntime."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnxruntime
import pytest
import timeline_workers
from onnx_models import mlp, repeated_blocks, resnet_block, transformer_layer
from quick_measure import QUICK

import workers
from compiler.graph import GraphModule, import_onnx
from compiler.graph.executor import build_graph_cuda
from compiler.runtime.cuda_driver import cuda_available
from db import Purpose
from tuner import model_tune
from tuner.model_tasks import extract_tasks
from tuner.model_tune import ModelTuneOptions, ModelTuneResult, TaskProgress, tune_model
from tuner.scheduler import TaskState
from tuner.tune import start_tuning


def onnxruntime_outputs(model, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return session.run(None, inputs)


def random_inputs(graph, rng) -> dict[str, np.ndarray]:
    return {
        name: rng.standard_normal(kind.shape).astype(kind.dtype)
        for name, kind in graph.inputs.items()
    }


def test_a_repeated_block_is_one_task_weighed_by_its_occurrences(rng) -> None:
    # NCHW: blocked, the first block reads the NCHW input in place, a task of its own
    tasks = extract_tasks(import_onnx(repeated_blocks(rng, copies=3)), conv_block=0)
    convolutions = [t for t in tasks if t.kind.startswith("conv2d")]
    # The 3x3 convolution is offered computed directly and by Winograd's F(2x2) and
    # F(4x4), each a task of the same weight (the build picks the fastest).
    assert [t.kind for t in convolutions] == [
        "conv2d_add_relu",
        "conv2d_add_relu[winograd2]",
        "conv2d_add_relu[winograd4]",
    ]
    assert [t.weight for t in convolutions] == [3, 3, 3]
    assert all(t.worth_tuning for t in convolutions)
    assert convolutions[0].flop_count == 3 * convolutions[0].task.flop_count


@pytest.mark.parametrize(
    ("seconds", "counted"),
    [
        ([3e-3, 1e-3, 2e-3], 1e-3),  # direct, F(2x2), F(4x4): F(2x2), by far
        ([1.0e-3, 0.95e-3, 2e-3], 1.0e-3),  # F(2x2) within the edge: the build runs direct
    ],
)
def test_the_estimate_counts_only_the_algorithm_a_build_takes(
    rng, seconds: list[float], counted: float
) -> None:
    tasks = extract_tasks(import_onnx(repeated_blocks(rng, copies=3)), conv_block=0)
    convolutions = [t for t in tasks if t.kind.startswith("conv2d")]
    assert len({t.choice for t in convolutions}) == 1 and convolutions[0].choice
    progress = [
        TaskProgress(t, TaskState(t.weight, 8, ((8, s),), choice=t.choice))
        for t, s in zip(convolutions, seconds, strict=True)
    ]
    result = ModelTuneResult(tuple(progress), rounds=3, wall_seconds=1.0)
    assert result.estimated_seconds == pytest.approx(3 * counted)


def test_a_budget_is_shared_by_the_tasks_resumed_and_the_tuned_model_is_right(
    rng, database, backend
) -> None:
    model = mlp(rng)
    graph = import_onnx(model)
    tasks = extract_tasks(graph)
    tuned = [t for t in tasks if t.worth_tuning]
    assert len(tuned) >= 2  # two dense layers and the softmax
    options = ModelTuneOptions(trials=24, round_trials=4, tuner="random")
    rounds = []
    result = tune_model(
        tasks, database=database, workers=backend, options=options, on_round=rounds.append
    )
    assert result.trials == 24 and len(rounds) == result.rounds
    assert all(p.state.trials >= 4 for p in result.tasks)  # the warm-up reached each
    assert result.estimated_seconds is not None and result.estimated_seconds > 0
    # Each task's two fastest and its default schedule re-timed side by side, and the
    # estimate reads the re-timings.
    retimed = database.records(purpose=Purpose.RETIME, limit=1000)
    assert result.retimed == len(retimed) >= len(tuned)
    # Where the time went: every trial built and run (the finalists' builds are kept),
    # then each finalist run once a round.
    work = result.work
    assert work.builds >= result.trials and work.build_seconds > 0
    assert work.runs >= result.trials + options.retime_rounds * result.retimed
    assert 0 < work.run_seconds < result.wall_seconds and result.search_seconds > 0
    assert f"{work.builds} builds took" in result.time_text()
    for progress in result.tasks:
        key, target = progress.task.task.workload_key, progress.task.task.target
        own = [r for r in retimed if r.workload_key == key]
        assert 1 <= len(own) <= 3
        assert all(len(r.run_times) >= options.retime_rounds for r in own)
        assert progress.state.best_seconds == database.best(key, target)[0].seconds
        assert database.best(key, target)[0].purpose is Purpose.RETIME

    again = tune_model(tasks, database=database, workers=backend, options=options)
    assert again.rounds == 0 and again.trials == 24  # resumed: nothing left to measure
    assert again.retimed == 0  # nor to re-time
    assert again.work.builds == again.work.runs == 0  # the same workers, counted anew

    inputs = random_inputs(graph, rng)
    tuned_outputs = GraphModule(graph, database=database).run(**inputs).values()
    for ours, theirs in zip(tuned_outputs, onnxruntime_outputs(model, inputs), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


def test_the_next_round_searches_while_a_batch_builds_and_no_run_meets_either(
    rng, database, tmp_path, monkeypatch
) -> None:
    """While a round's batch builds, the next round's search runs; every timing waits
    for both."""
    path = tmp_path / "timeline"
    monkeypatch.setenv(timeline_workers.TIMELINE_ENV, str(path))
    folders = [timeline_workers.TESTS_FOLDER, os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(folders))

    def logged_start(*args, **kwargs):
        timeline_workers.log("search", "start")
        try:
            return start_tuning(*args, **kwargs)
        finally:
            timeline_workers.log("search", "end")

    monkeypatch.setattr(model_tune, "start_tuning", logged_start)
    tasks = extract_tasks(import_onnx(mlp(rng)))
    options = ModelTuneOptions(trials=24, round_trials=4, tuner="random", retime_top=0)
    with workers.create(
        "local",
        config=QUICK,
        build_function=timeline_workers.BUILD_FUNCTION,
        measurer=timeline_workers.MEASURER,
    ) as backend:
        result = tune_model(tasks, database=database, workers=backend, options=options)
    assert result.trials == 24
    steps = timeline_workers.intervals(path)
    builds, runs, searches = (
        [s for s in steps if s.step == kind] for kind in ("build", "run", "search")
    )
    assert len(builds) == len(runs) == 24  # each trial built once
    assert not any(run.overlaps(other) for run in runs for other in builds + searches)
    assert any(search.overlaps(build) for search in searches for build in builds)


def test_stalled_tasks_spend_what_is_left_of_the_budget(rng, database, backend) -> None:
    """A task whose best stopped falling gives its rounds to the others, but the
    budget is spent even once every task has stalled."""
    tasks = extract_tasks(import_onnx(mlp(rng)))
    options = ModelTuneOptions(
        trials=40, round_trials=4, tuner="random", stall_rounds=1, retime_top=0
    )
    result = tune_model(tasks, database=database, workers=backend, options=options)
    assert result.trials == 40 and result.rounds == 10
    assert all(p.state.stopped != "space exhausted" for p in result.tasks)


@pytest.mark.parametrize("build", [resnet_block, transformer_layer])
def test_a_tuned_model_still_computes_what_onnxruntime_does(build, rng, database, backend) -> None:
    model = build(rng)
    graph = import_onnx(model)
    tasks = extract_tasks(graph)
    worth = sum(t.worth_tuning for t in tasks)
    options = ModelTuneOptions(trials=2 * worth, round_trials=2, tuner="random")
    result = tune_model(tasks, database=database, workers=backend, options=options)
    assert result.estimated_seconds is not None  # every tuned task has a schedule
    inputs = random_inputs(graph, rng)
    tuned_outputs = GraphModule(graph, database=database).run(**inputs).values()
    for ours, theirs in zip(tuned_outputs, onnxruntime_outputs(model, inputs), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)


def test_tune_model_and_run_from_the_command_line(rng, tmp_path) -> None:
    model = mlp(rng)
    path, url = tmp_path / "mlp.onnx", f"sqlite:///{tmp_path / 'tune.db'}"
    path.write_bytes(model.SerializeToString())
    inputs = random_inputs(import_onnx(model), rng)
    np.savez(tmp_path / "x.npz", **inputs)
    cli = [sys.executable, "-m", "tuner.cli.main"]
    tuned = subprocess.run(
        [*cli, "tune-model", str(path), "--trials", "8", "--round", "4", "--db", url],
        capture_output=True,
        text=True,
        check=False,
    )
    assert tuned.returncode == 0, tuned.stderr
    assert "8 trials in 2 rounds" in tuned.stdout
    said = tuned.stdout.splitlines()
    assert any(line.startswith("time: ") and "builder-seconds" in line for line in said)
    assert "finalists side by side, 3 rounds" in tuned.stderr  # said before it starts
    files = ["--inputs", str(tmp_path / "x.npz"), "--output", str(tmp_path / "y.npz")]
    files += ["--export", str(tmp_path / "compiled")]
    ran = subprocess.run(
        [*cli, "run", str(path), "--db", url, *files],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert "latency:" in ran.stdout
    with np.load(tmp_path / "y.npz") as outputs:
        ours = [outputs[name] for name in outputs.files]
    for mine, theirs in zip(ours, onnxruntime_outputs(model, inputs), strict=True):
        np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-5)
    exported = GraphModule.load(tmp_path / "compiled").run(**inputs).values()
    for again, mine in zip(exported, ours, strict=True):
        np.testing.assert_array_equal(again, mine)


@pytest.mark.parametrize(
    ("words", "said"),
    [
        (["run", "--shape", "x=1,a"], "--shape 'x=1,a'"),
        (["run", "--inputs", "missing.npz"], "missing.npz"),
        (["run", "--output", "missing/y.npz"], "--output 'missing/y.npz': the folder 'missing'"),
        (["run", "--export", "{model}"], "is a file; name a folder"),
        pytest.param(
            ["run", "--target", "cuda -arch=sm_80"],
            "runs the model on a GPU, and this host",
            marks=pytest.mark.skipif(cuda_available() is None, reason="a GPU is here"),
        ),
        (["tune-model", "--target", "llvm -mcpu=foo"], "--target: target 'llvm -mcpu=foo'"),
        (["tune-model", "--target", "opencl"], "the allowed forms are"),
    ],
)
def test_bad_model_arguments_are_one_line_errors(rng, tmp_path, words, said) -> None:
    path = tmp_path / "mlp.onnx"
    path.write_bytes(mlp(rng).SerializeToString())
    command, *flags = (word.format(model=path) for word in words)
    database = ["--db", "sqlite:///" + str(tmp_path / "t.db")]
    done = subprocess.run(
        [sys.executable, "-m", "tuner.cli.main", command, str(path), *database, *flags],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert done.stderr.startswith(f"tensortune {command}: error: ")
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (tmp_path / "missing").exists()


def test_a_models_tasks_for_a_gpu_are_the_functions_its_gpu_build_runs(rng) -> None:
    """Plain layouts on a cuda target: the tasks' workloads are the plan's, so what
    ``tune-model --target cuda`` tunes is what ``GraphModule`` builds for it."""
    graph = import_onnx(repeated_blocks(rng, copies=2))
    target = "cuda -arch=sm_80"
    tasks = extract_tasks(graph, target)
    assert all(task.task.target == target for task in tasks)
    assert [t.kind for t in tasks] == [t.kind for t in extract_tasks(graph, conv_block=0)]
    plan, _, _ = build_graph_cuda(graph, target)
    assert {step.key for step in plan.steps} <= {task.task.workload_key for task in tasks}
