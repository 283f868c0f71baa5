"""Which timing of a model's kernel predicts its time inside the model: ResNet-18's 3x3
convolutions, every algorithm (direct, Winograd F(2x2) and F(4x4)) on its default
schedule, timed by the runner with warm weights (calibrated loops of calls, how the
runner times every kernel), with the weights evicted from the caches before each call
(``MeasureConfig.cold_weights``), and inside the model.

    python benchmarks/cold_weights.py            # ResNet-18, 224x224
    python benchmarks/cold_weights.py --small    # the shrunken model, seconds

For the in-model times, the model is built once per algorithm from a database holding
only that algorithm's measurements, so every convolution that has the algorithm runs
it; each kernel's time is the least of five medians over ten runs of the model
(``GraphModule.profile``), as the runner's is the fastest of its runs.
A row per task: the three times in ms and the two ratios to the
in-model time. The ratio closer to 1 is the timing a search should trust. Nothing else
should run on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or os.curdir) == _HERE:
    del sys.path[0]  # run as a script, this file would shadow the packages it measures

import numpy as np  # noqa: E402

import workers  # noqa: E402
from compiler.graph import Graph, GraphModule, import_onnx  # noqa: E402
from compiler.schedule import Schedule  # noqa: E402
from db.memory import MemoryDatabase  # noqa: E402
from tuner.measurement import to_measurement  # noqa: E402
from tuner.model_tasks import ModelTask, extract_tasks  # noqa: E402
from workers import Candidate, MeasureConfig, RunResult  # noqa: E402

sys.path.append(_HERE)  # the packages are imported: now the sibling modules can be
from model_zoo import FULL, SMALL, resnet18  # noqa: E402

PROFILE_RUNS = 10
PROFILES = 5
REPEAT = 10


def measured(tasks: list[ModelTask], config: MeasureConfig) -> list[RunResult]:
    """Each task's default schedule, measured by the local workers under ``config``."""
    candidates = [
        Candidate.make(t.task.func, Schedule(t.task.func).trace, t.task.target) for t in tasks
    ]
    with workers.create("local", config=config) as backend:
        return backend.measure(candidates)


def best_ms(result: RunResult) -> float:
    """The fastest run, which is what the tuner ranks by."""
    assert result.ok, result.error
    return min(result.run_times) * 1e3


def in_model_ms(graph: Graph, tasks: list[ModelTask], results: list[RunResult]) -> dict[str, float]:
    """Each task's kernel time inside the model built from ``results`` alone."""
    database = MemoryDatabase()
    for task in tasks:
        database.commit_workload(task.task.func)
    database.commit_records(to_measurement(result) for result in results)
    module = GraphModule(graph, database=database)
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


def algorithm(task: ModelTask) -> str:
    """``[winograd2]`` or ``[winograd4]`` from the task's kind, or ``direct``."""
    return task.kind[task.kind.index("[") :] if "[" in task.kind else "direct"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", action="store_true", help="the shrunken ResNet-18")
    args = parser.parse_args()
    size = SMALL if args.small else FULL
    graph = import_onnx(resnet18(np.random.default_rng(0), size.resnet))
    tasks = [t for t in extract_tasks(graph) if t.choice]
    warm = measured(tasks, MeasureConfig(repeat=REPEAT))
    cold = measured(tasks, MeasureConfig(repeat=REPEAT, cold_weights=True))
    in_model: dict[str, float] = {}  # each algorithm's kernels, built from the cold times
    for name in ("direct", "[winograd2]", "[winograd4]"):
        chosen = [k for k, t in enumerate(tasks) if algorithm(t) == name]
        in_model |= in_model_ms(graph, [tasks[k] for k in chosen], [cold[k] for k in chosen])
    print(
        f"{'task':42} {'warm ms':>8} {'cold ms':>8} {'model ms':>8} "
        f"{'warm/model':>10} {'cold/model':>10}"
    )
    for task, warm_result, cold_result in zip(tasks, warm, cold, strict=True):
        model = in_model.get(task.task.workload_key)
        w, c = best_ms(warm_result), best_ms(cold_result)
        ratios = f"{w / model:10.2f} {c / model:10.2f}" if model else f"{'-':>10} {'-':>10}"
        print(
            f"{task.kind[:42]:42} {w:8.3f} {c:8.3f} "
            f"{model if model else float('nan'):8.3f} {ratios}"
        )


if __name__ == "__main__":
    main()
