"""The workloads the tuning benchmarks share, and tuning one of them from scratch.

Imported by ``tune.py``, ``search.py``, ``coexist.py`` and ``gpu.py``.
"""

from __future__ import annotations

import os
import tempfile

import compiler
import workers
from db import SQLDatabase
from tuner.progress import Progress
from tuner.space import Space
from tuner.space_choice import choose_space
from tuner.task import TuneTask
from tuner.tune import TuneOptions, TuneResult, tune
from workers import MeasureConfig

GEMM = {"op": "matmul", "args": {"m": 1024, "n": 1024, "k": 1024}}
CONV = {
    "op": "conv2d_nchw",
    "args": {
        "batch": 1,
        "in_channels": 64,
        "height": 56,
        "width": 56,
        "out_channels": 64,
        "kernel": 3,
        "padding": 1,
    },
}


def tune_from_scratch(
    task: TuneTask,
    *,
    trials: int,
    seed: int,
    space: Space | str = "auto",
    tuner: str = "xgb",
    progress: Progress | None = None,
    measure: MeasureConfig | None = None,
) -> tuple[TuneResult, compiler.runtime.Module]:
    """``task`` tuned with the local workers (timing as ``measure`` says; None: the
    runner's default) into a temporary database, over ``space`` (or the space it names:
    ``tuner.space_choice``) with the search ``tuner``, and the module ``compiler.build``
    makes from that database (the best re-timed schedule).
    The search runs by itself, without the default schedule as a first trial, so the
    figures compare searches and spaces."""
    chosen = space
    if not isinstance(chosen, Space):
        chosen = choose_space(space, task.func, target=task.target, seed=seed)
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{os.path.join(folder, 'tune.db')}"
        with SQLDatabase(url) as database, workers.create("local", config=measure) as backend:
            options = TuneOptions(trials=trials, seed=seed, tuner=tuner, baseline=False)
            result = tune(
                task,
                database=database,
                workers=backend,
                options=options,
                space=chosen,
                progress=progress,
            )
            return result, compiler.build(task.func, target=task.target, database=database)
