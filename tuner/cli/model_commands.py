"""``tensortune tune-model`` and ``tensortune run``: a whole ONNX model tuned under one
trial budget, and run with the tuned schedules on given or random inputs.

``--shape NAME=D0,D1,...`` fixes an input's dimensions where the model leaves them
open (a batch given as a name); a model whose inputs are not all static is refused
with the input to fix.
"""

from __future__ import annotations

import argparse
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

import db
import workers
from compiler.graph import Graph, GraphError, GraphModule, import_onnx
from compiler.runtime.cuda_driver import cuda_available
from compiler.target.parse import target_kind
from tuner import scheduler
from tuner.cli.arguments import add_target_argument, int_in_range
from tuner.cli.errors import UsageError
from tuner.cli.tune_commands import backend_of, worker_arguments
from tuner.model_tasks import ModelTask, extract_tasks, parse_input_shapes
from tuner.model_tune import ModelTuneOptions, ModelTuneResult, tune_model

# Calls of the model timed by ``run``, after one call that warms it up.
RUNS = 10


def add_commands(commands: Any) -> None:
    tune = commands.add_parser("tune-model", help="tune every task of an ONNX model")
    model_arguments(tune)
    _database_argument(tune)
    tune.add_argument(
        "--trials", type=int_in_range(1), default=2000, help="the model's trial budget"
    )
    tune.add_argument(
        "--scheduler",
        choices=sorted(scheduler.KINDS),
        default="gradient",
        help="how the budget is shared by tasks (default: gradient)",
    )
    tune.add_argument(
        "--round",
        type=int_in_range(1),
        help="trials per round (default: 16, fewer for a budget too small to give each task one)",
    )
    tune.add_argument(
        "--stall-rounds",
        type=int_in_range(0),
        default=5,
        help="a task whose best fell by less than 1%% over its last this many rounds gets "
        "no more while others take rounds; they get its trials (default: 5; 0: never stop "
        "a task)",
    )
    tune.add_argument("--seed", type=int_in_range(0), default=0, help="seed of every choice")
    worker_arguments(tune)
    tune.set_defaults(run=run_tune_model)

    run = commands.add_parser("run", help="run an ONNX model with its tuned schedules")
    model_arguments(run)
    _database_argument(run)
    run.add_argument("--inputs", help="an .npz file of the inputs by name (default: random)")
    run.add_argument("--output", help="write the outputs by name to this .npz file")
    run.add_argument(
        "--export",
        metavar="FOLDER",
        help="also write the compiled model there (model.so, plan.json, weights.npz), "
        "which compiler.graph.GraphModule.load runs without the compiler or a database",
    )
    run.set_defaults(run=run_model)


def model_arguments(parser: argparse.ArgumentParser) -> None:
    """The model file, ``--shape`` (read by ``shapes_of``) and ``--target``."""
    parser.add_argument("model", help="an ONNX model file")
    parser.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="NAME=D0,D1,...",
        help="fix the dimensions of an input the model leaves open",
    )
    add_target_argument(parser)


def _database_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", "--db", dest="url", help="database URL (default: SQLite)")


def run_tune_model(url: str, args: argparse.Namespace) -> None:
    graph = _graph(args)
    tasks = extract_tasks(graph, args.target)
    options = ModelTuneOptions(
        trials=args.trials,
        round_trials=args.round,
        stall_rounds=args.stall_rounds or None,
        scheduler=args.scheduler,
        seed=args.seed,
    )
    kind, backend_options = backend_of(args)
    with db.create(url) as database, workers.create(kind, **backend_options) as backend:
        result = tune_model(
            tasks,
            database=database,
            workers=backend,
            options=options,
            on_round=_print_round,
            on_retime=partial(_print_retiming, rounds=options.retime_rounds),
        )
    print(format_tasks(tasks, result))


def run_model(url: str, args: argparse.Namespace) -> None:
    _check_destinations(args)
    if target_kind(args.target) == "cuda":
        if args.export:
            raise UsageError(
                "--export writes a model built for the CPU; leave it out with a cuda --target"
            )
        reason = cuda_available()
        if reason is not None:
            raise UsageError(
                f"--target {args.target!r} runs the model on a GPU, and this host has none "
                f"it can use: {reason}"
            )
    graph = _graph(args)
    inputs = _inputs(graph, args.inputs)
    with db.create(url) as database:
        module = GraphModule(graph, args.target, database=database)
    try:
        outputs = module.run(**inputs)
    except GraphError as err:
        raise UsageError(f"--inputs: {err}") from None
    seconds = []
    for _ in range(RUNS):
        start = time.perf_counter()
        module.run(**inputs)
        seconds.append(time.perf_counter() - start)
    if args.output:
        arrays: dict[str, Any] = outputs
        np.savez(args.output, **arrays)
    if args.export:
        module.export(args.export)
    shapes = ", ".join(f"{name} {array.shape}" for name, array in outputs.items())
    print(f"outputs: {shapes}")
    print(f"latency: {1e3 * float(np.median(seconds)):.3f} ms (median of {RUNS} runs)")


def format_tasks(tasks: list[ModelTask], result: ModelTuneResult) -> str:
    """A line per task (weight, GFLOPs, trials, best), then the model's estimate and a
    line per task that stopped getting trials before the budget was spent, with why."""
    lines = [f"{'task':40} {'weight':>6} {'MFLOP':>9} {'trials':>6} {'best ms':>9}"]
    progress = {p.task.task.workload_key: p.state for p in result.tasks}
    for task in tasks:
        state = progress.get(task.task.workload_key)
        trials = "-" if state is None else str(state.trials)
        best = (
            "-"
            if state is None or state.best_seconds is None
            else f"{state.best_seconds * 1e3:.4g}"
        )
        lines.append(
            f"{task.kind[:40]:40} {task.weight:>6} {task.task.flop_count / 1e6:>9.2f} "
            f"{trials:>6} {best:>9}"
        )
    retimed = f", {result.retimed} finalists re-timed side by side" if result.retimed else ""
    lines.append(
        f"{result.trials} trials in {result.rounds} rounds{retimed}, "
        f"{result.wall_seconds:.1f} s; tuned tasks' estimated time {result.estimate_text()}"
    )
    lines.append(f"time: {result.time_text()}")
    lines.extend(
        f"stopped early: {p.task.kind} after {p.state.trials} trials: {p.state.stopped}"
        for p in result.tasks
        if p.state.stopped
    )
    return "\n".join(lines)


def _print_round(result: ModelTuneResult) -> None:
    print(
        f"round {result.rounds}: {result.trials} trials, estimated {result.estimate_text()}",
        file=sys.stderr,
        flush=True,
    )


def _print_retiming(count: int, *, rounds: int) -> None:
    print(f"re-timing {count} finalists side by side, {rounds} rounds", file=sys.stderr, flush=True)


def _check_destinations(args: argparse.Namespace) -> None:
    """Refuse ``--output`` and ``--export`` before the model is built and run, where
    they could not be written."""
    if args.output and not Path(args.output).absolute().parent.is_dir():
        raise UsageError(
            f"--output {args.output!r}: the folder {str(Path(args.output).parent)!r} does "
            "not exist; create it first, or name a file in a folder that exists"
        )
    if args.export and Path(args.export).exists() and not Path(args.export).is_dir():
        raise UsageError(
            f"--export {args.export!r} is a file; name a folder (made if it does not exist)"
        )


def _graph(args: argparse.Namespace) -> Graph:
    try:
        return import_onnx(args.model, shapes=shapes_of(args))
    except GraphError as err:
        raise UsageError(f"{args.model}: {err}") from None


def shapes_of(args: argparse.Namespace) -> dict[str, tuple[int, ...]]:
    """The input shapes ``--shape`` fixes; UsageError naming a malformed one."""
    try:
        return parse_input_shapes(args.shape)
    except ValueError as err:
        raise UsageError(f"--shape {err}") from None


def _inputs(graph: Graph, path: str | None) -> dict[str, np.ndarray]:
    if path is None:
        rng = np.random.default_rng(0)
        return {
            name: rng.standard_normal(kind.shape).astype(kind.dtype)
            for name, kind in graph.inputs.items()
        }
    try:
        with np.load(path) as stored:
            return {name: stored[name] for name in stored.files}
    except (OSError, ValueError) as err:
        raise UsageError(f"--inputs {path!r}: not an .npz file of arrays ({err})") from None
