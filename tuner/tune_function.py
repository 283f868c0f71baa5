"""``tune_tir``: tune one PrimFunc from Python in one call (MetaSchedule's ``tune_tir``).

    def schedule(sch):
        i, j, k = sch.get_loops(sch.get_block("C"))
        sch.split(j, sch.sample_perfect_tile(j, n=2))
        ...

    result = tuner.tune_tir(func, space=schedule, trials=32)
    kernel = compiler.build(func, database=db.create(db.default_url()))

What the command line does for an operator, this does for any workload: the space
(a schedule function, or a template through ``"auto"`` / ``"template"``), the
local workers unless others are given, the default database unless one is given,
and the model-based search. Every record lands in the database under the
workload's key, so the same call resumes, and ``compiler.build(func,
database=...)`` replays the best trace.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import db
import workers as worker_backends
from compiler.ir.function import PrimFunc
from compiler.target.parse import Target
from db import Database
from tuner.space.schedule_fn import ScheduleFn
from tuner.space_choice import choose_space
from tuner.task import TuneTask
from tuner.tune import TuneOptions, TuneResult, check_search, tune
from workers import Workers


def tune_tir(
    func: PrimFunc,
    *,
    space: ScheduleFn | str = "auto",
    trials: int = 64,
    target: str | Target = "llvm",
    database: Database | str | None = None,
    workers: Workers | str = "local",
    seed: int = 0,
    tuner: str = "auto",
    batch_size: int = 16,
    template: str | None = None,
) -> TuneResult:
    """Tune ``func`` for ``trials`` measurements in all (stored ones count, so calling
    again resumes) and return what the run did. ``space`` is a schedule function
    ``f(sch)`` or a choice of ``tuner.space_choice`` (``template`` names the
    template of ``"auto"`` or ``"template"``); ``database`` a Database, a kind
    or URL for ``db.create``, or None for the default one (``db.default_url``: this
    call is an edge, like the command line); ``workers`` a Workers or a
    kind for ``workers.create``; ``tuner`` a search kind that can search the space
    (else SearchError, before anything starts). Databases and workers made
    here are closed here; given ones are left open."""
    options = TuneOptions(trials=trials, tuner=tuner, batch_size=batch_size, seed=seed)
    task = TuneTask.from_func(func, target)
    chosen = choose_space(space, func, target=task.target, template=template, seed=seed)
    check_search(chosen, options)
    with _opened_database(database) as opened, _started_workers(workers) as backend:
        return tune(task, database=opened, workers=backend, options=options, space=chosen)


@contextlib.contextmanager
def _opened_database(database: Database | str | None) -> Iterator[Database]:
    if database is None or isinstance(database, str):
        with db.create(db.default_url() if database is None else database) as opened:
            yield opened
    else:
        yield database


@contextlib.contextmanager
def _started_workers(workers: Workers | str) -> Iterator[Workers]:
    if isinstance(workers, str):
        with worker_backends.create(workers) as started:
            yield started
    else:
        yield workers
