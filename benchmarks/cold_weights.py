"""Which timing of a model's kernel predicts its time inside the model: a model's
kernels timed by the runner with warm weights (calibrated loops of calls), with the
weights evicted from the caches before each call (``MeasureConfig.cold_weights``, the
default), and inside the model.

    python benchmarks/cold_weights.py            # the 3x3 convolutions' default schedules
    python benchmarks/cold_weights.py --small    # the same on the shrunken model, seconds
    python benchmarks/cold_weights.py --database r18.db   # the kernels a tuned model runs
    python benchmarks/cold_weights.py --model mobilenet --database m.db

Without ``--database``, every 3x3 convolution runs each algorithm (direct, Winograd
F(2x2) and F(4x4)) on its default schedule: the model is built once per algorithm from a
database holding only that algorithm's measurements. With ``--database`` (an SQLite
file that ``benchmarks/model.py --database`` tuned the model into; ResNet-18 unless
``--model`` names another of that script's models), the model is built
from it and each kernel it runs is timed with its best trace. A kernel's in-model time
is the least of five medians over ten runs of the model (``GraphModule.profile``), as
the runner's is the fastest of its runs. A row per kernel: the three times in ms and
the two ratios of the in-model time to them; with ``--database``, last, the three sums
over a model run. The
ratio closer to 1 is the timing a search should trust. Nothing else should run on the
machine meanwhile.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from dataclasses import replace

_HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or os.curdir) == _HERE:
    del sys.path[0]  # run as a script, this file would shadow the packages it measures

import numpy as np  # noqa: E402

import db  # noqa: E402
import workers  # noqa: E402
from compiler.graph import Graph, GraphModule, import_onnx  # noqa: E402
from compiler.schedule import Schedule  # noqa: E402
from db.memory import MemoryDatabase  # noqa: E402
from tuner.measurement import to_measurement  # noqa: E402
from tuner.model_tasks import ModelTask, extract_tasks  # noqa: E402
from workers import Candidate, MeasureConfig, RunResult  # noqa: E402

sys.path.append(_HERE)  # the packages are imported: now the sibling modules can be
from model_zoo import FULL, MODELS, SMALL  # noqa: E402

PROFILE_RUNS = 10
PROFILES = 5
COLD = MeasureConfig(repeat=10, cold_weights=True)
WARM = replace(COLD, cold_weights=False)


def measured(candidates: list[Candidate], config: MeasureConfig) -> list[RunResult]:
    """``candidates`` measured by the local workers under ``config``."""
    with workers.create("local", config=config) as backend:
        return backend.measure(candidates)


def best_ms(result: RunResult) -> float:
    """The fastest run, which is what the tuner ranks by."""
    assert result.ok, result.error
    return min(result.run_times) * 1e3


def in_model_ms(module: GraphModule) -> dict[str, float]:
    """Each workload's kernel time inside ``module``, by workload key."""
    inputs = {
        name: np.random.default_rng(1).standard_normal(kind.shape).astype(kind.dtype)
        for name, kind in module.plan.inputs.items()
    }
    module.run(**inputs)
    times: dict[str, list[float]] = {}
    for _ in range(PROFILES):
        for step, seconds in module.profile(PROFILE_RUNS, **inputs):
            times.setdefault(step.key, []).append(seconds * 1e3)
    return {key: min(values) for key, values in times.items()}


def default_module(graph: Graph, tasks: list[ModelTask], results: list[RunResult]) -> GraphModule:
    """The model built from ``results`` of ``tasks`` alone."""
    database = MemoryDatabase()
    for task in tasks:
        database.commit_workload(task.task.func)
    database.commit_records(to_measurement(result) for result in results)
    return GraphModule(graph, database=database)


def algorithm(task: ModelTask) -> str:
    """``[winograd2]`` or ``[winograd4]`` from the task's kind, or ``direct``."""
    return task.kind[task.kind.index("[") :] if "[" in task.kind else "direct"


def default_rows(graph: Graph) -> list[tuple[ModelTask, int, float, float, float]]:
    """(task, calls per model run, warm, cold, in-model ms) per 3x3 convolution and
    algorithm, on the default schedules."""
    tasks = [t for t in extract_tasks(graph) if t.choice]
    candidates = [
        Candidate.make(t.task.func, Schedule(t.task.func).trace, t.task.target) for t in tasks
    ]
    warm, cold = measured(candidates, WARM), measured(candidates, COLD)
    in_model: dict[str, float] = {}
    for name in ("direct", "[winograd2]", "[winograd4]"):
        chosen = [k for k, t in enumerate(tasks) if algorithm(t) == name]
        module = default_module(graph, [tasks[k] for k in chosen], [cold[k] for k in chosen])
        in_model |= in_model_ms(module)
    return [
        (t, 1, best_ms(w), best_ms(c), in_model.get(t.task.workload_key, float("nan")))
        for t, w, c in zip(tasks, warm, cold, strict=True)
    ]


def tuned_rows(graph: Graph, path: str) -> list[tuple[ModelTask, int, float, float, float]]:
    """(task, calls per model run, warm, cold, in-model ms) per kernel of the model
    built from the database at ``path``, each timed with its best trace."""
    tasks = {t.task.workload_key: t for t in extract_tasks(graph)}
    with db.create(f"sqlite:///{path}") as database:
        module = GraphModule(graph, database=database)
        calls: dict[str, int] = {}
        for step in module.plan.steps:
            calls[step.key] = calls.get(step.key, 0) + 1
        chosen = [tasks[key] for key in calls if key in tasks]
        candidates = []
        for task in chosen:
            best = database.best(task.task.workload_key, task.task.target, 1)
            trace = best[0].trace if best else Schedule(task.task.func).trace
            candidates.append(Candidate.make(task.task.func, trace, task.task.target))
    in_model = in_model_ms(module)
    warm, cold = measured(candidates, WARM), measured(candidates, COLD)
    return [
        (t, calls[t.task.workload_key], best_ms(w), best_ms(c), in_model[t.task.workload_key])
        for t, w, c in zip(chosen, warm, cold, strict=True)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="resnet18")
    parser.add_argument("--small", action="store_true", help="the shrunken model")
    parser.add_argument(
        "--database", metavar="PATH", help="an SQLite file the model was tuned into"
    )
    args = parser.parse_args()
    if args.database is not None and not os.path.isfile(args.database):
        parser.error(f"--database {args.database!r}: no such file")
    size = SMALL if args.small else FULL
    graph = import_onnx(MODELS[args.model](np.random.default_rng(0), size))
    rows = default_rows(graph) if args.database is None else tuned_rows(graph, args.database)
    print(
        f"{'task':42} {'calls':>5} {'warm ms':>8} {'cold ms':>8} {'model ms':>8} "
        f"{'model/warm':>10} {'model/cold':>10}"
    )
    sums = [0.0, 0.0, 0.0]
    for task, calls, warm, cold, model in rows:
        print(
            f"{task.kind[:42]:42} {calls:>5} {warm:8.3f} {cold:8.3f} {model:8.3f} "
            f"{model / warm:10.2f} {model / cold:10.2f}"
        )
        if not math.isnan(model):  # an algorithm the model does not run has no time in it
            sums = [total + calls * ms for total, ms in zip(sums, (warm, cold, model), strict=True)]
    if args.database is None:
        return  # each convolution ran every algorithm: there is no one model run to sum
    warm_sum, cold_sum, model_sum = sums
    print(
        f"{'a model run':42} {'':>5} {warm_sum:8.3f} {cold_sum:8.3f} {model_sum:8.3f} "
        f"{model_sum / warm_sum:10.2f} {model_sum / cold_sum:10.2f}"
    )


if __name__ == "__main__":
    main()
