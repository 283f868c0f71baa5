"""The commands that talk to a tuning service instead of tuning here: ``submit``
(the same workload arguments as ``tune``), ``jobs``, ``watch ID`` (the progress bar of
``tune``, fed by the job's event stream) and ``cancel ID``; and ``best``, which asks
the service instead of the local database when one is named. The service is
``--server`` or ``$TENSORTUNE_SERVER``, the token ``--token`` or ``$TENSORTUNE_TOKEN``."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from tuner import scheduler
from tuner.cli.arguments import int_in_range
from tuner.cli.errors import UsageError
from tuner.cli.model_commands import model_arguments, shapes_of
from tuner.cli.tune_commands import (
    describe_best,
    names_a_key,
    run_best,
    spec_from_arguments,
    workload_arguments,
)
from tuner.client import Client
from tuner.progress import Progress

SERVER_VARIABLE = "TENSORTUNE_SERVER"
TOKEN_VARIABLE = "TENSORTUNE_TOKEN"


def add_commands(commands: Any) -> None:
    submit = commands.add_parser("submit", help="queue a tuning job on a tensortune service")
    workload_arguments(submit)
    submit.add_argument("--trials", type=int_in_range(1), default=64, help="trial budget")
    submit.add_argument("--tuner", default="auto", help="search strategy (default auto)")
    submit.add_argument(
        "--space", default="auto", choices=("auto", "template", "generated"), help="the space"
    )
    submit.add_argument("--seed", type=int_in_range(0), default=0, help="seed of every choice")
    submit.add_argument(
        "--priority",
        type=int_in_range(-1000, 1000),
        default=0,
        help="queued jobs of a higher priority run first (default 0)",
    )
    submit.set_defaults(run=_run(_submit))
    submit_model = commands.add_parser(
        "submit-model", help="send an ONNX model to a tensortune service and queue its tuning"
    )
    model_arguments(submit_model)
    submit_model.add_argument(
        "--trials", type=int_in_range(1), default=2000, help="the model's trial budget"
    )
    submit_model.add_argument("--scheduler", choices=sorted(scheduler.KINDS), default="gradient")
    submit_model.add_argument("--tuner", default="auto", help="search strategy (default auto)")
    submit_model.add_argument("--seed", type=int_in_range(0), default=0)
    submit_model.add_argument("--priority", type=int_in_range(-1000, 1000), default=0)
    submit_model.set_defaults(run=_run(_submit_model))
    jobs = commands.add_parser("jobs", help="the jobs of a tensortune service, newest first")
    jobs.add_argument("--status", choices=("queued", "running", "done", "failed", "cancelled"))
    jobs.add_argument("--limit", type=int_in_range(1, 1000), default=20, help="how many")
    jobs.add_argument("--before", type=int_in_range(1), help="page on: jobs older than this id")
    jobs.set_defaults(run=_run(_jobs))
    watch = commands.add_parser("watch", help="follow a job of a tensortune service to its end")
    watch.add_argument("id", type=int_in_range(1), help="the job's id")
    watch.set_defaults(run=_run(_watch))
    cancel = commands.add_parser("cancel", help="cancel a job of a tensortune service")
    cancel.add_argument("id", type=int_in_range(1), help="the job's id")
    cancel.set_defaults(run=_run(_cancel))
    best = commands.choices["best"]
    best.set_defaults(run=_best_here_or_there)
    for parser in (submit, submit_model, jobs, watch, cancel, best):
        parser.add_argument("--server", help=f"the service's URL (default ${SERVER_VARIABLE})")
        parser.add_argument("--token", help=f"an API token (default ${TOKEN_VARIABLE})")
    for parser in (submit_model, jobs, watch, cancel):
        parser.set_defaults(url=None)  # no database here: the service has its own


def _run(command: Any) -> Any:
    """The command with a client of the service the arguments name; the database URL
    that every command gets is not used (the service has its own)."""

    def run(_url: str, args: argparse.Namespace) -> None:
        server = _server(args)
        if not server:
            raise UsageError(f"name the service: --server URL or ${SERVER_VARIABLE}")
        token = args.token or os.environ.get(TOKEN_VARIABLE)
        with Client(server, token) as client:
            command(client, args)

    return run


def _server(args: argparse.Namespace) -> str | None:
    return args.server or os.environ.get(SERVER_VARIABLE)


def _best_here_or_there(url: str, args: argparse.Namespace) -> None:
    """``best`` from the service when one is named, else from the local database."""
    if _server(args) is None:
        run_best(url, args)
    else:
        _run(_best)(url, args)


def _best(client: Client, args: argparse.Namespace) -> None:
    workload: str | dict[str, Any]
    if args.workload and args.spec is None and names_a_key(args.workload):
        if len(args.workload) != 64:
            raise UsageError(
                f"workload key {args.workload!r}: a service is asked by the whole key "
                "(64 hex characters) or by the op and its shape"
            )
        workload = args.workload
    else:
        workload = spec_from_arguments(args)
    found = client.best(workload, target=args.target)
    if not found:
        raise UsageError(f"the service has no successful record of it on {args.target!r}")
    top = found[0]
    if args.json:
        print(json.dumps(top["trace"], sort_keys=True))
        return
    print(top["python"])
    print(
        describe_best(
            top["workload_key"],
            top["target"],
            top["seconds"],
            top["gflops"],
            top["retimed"],
            len(top["run_times"]),
            top["id"],
        )
    )


def _submit(client: Client, args: argparse.Namespace) -> None:
    job = client.submit(
        [spec_from_arguments(args)],
        target=args.target,
        trials=args.trials,
        tuner=args.tuner,
        space=args.space,
        seed=args.seed,
        priority=args.priority,
    )
    print(f"job {job['id']} queued: tensortune watch {job['id']}")


def _submit_model(client: Client, args: argparse.Namespace) -> None:
    shapes = shapes_of(args)
    with open(args.model, "rb") as file:
        content = file.read()
    stored = client.upload_model(content, os.path.basename(args.model), shapes)
    tuned = [task for task in stored["tasks"] if task["worth_tuning"]]
    print(f"model {stored['id']} {stored['name']!r}: {len(tuned)} tasks worth tuning")
    job = client.submit(
        [],
        model=stored["id"],
        target=args.target,
        trials=args.trials,
        tuner=args.tuner,
        seed=args.seed,
        priority=args.priority,
        scheduler=args.scheduler,
    )
    print(f"job {job['id']} queued: tensortune watch {job['id']}")


def _jobs(client: Client, args: argparse.Namespace) -> None:
    print(f"{'id':>6}  {'status':9}  {'trials':>13}  {'best GFLOP/s':>12}  workloads")
    page = client.jobs(args.status, limit=args.limit, before_id=args.before)
    for job in page:
        done = sum(t["trials_done"] for t in job["tasks"])
        asked = sum(t["trials_asked"] for t in job["tasks"])
        rates = [t["best_gflops"] for t in job["tasks"] if t["best_gflops"]]
        best = f"{max(rates):.2f}" if rates else "-"
        names = ", ".join(w.get("op", "?") for w in job["request"]["workloads"])
        print(f"{job['id']:>6}  {job['status']:9}  {f'{done}/{asked}':>13}  {best:>12}  {names}")
    if len(page) == args.limit:
        print(f"more: --before {page[-1]['id']}")


def _watch(client: Client, args: argparse.Namespace) -> None:
    progress: Progress | None = None
    job: dict[str, Any] = {}
    for job in client.events(args.id):
        if progress is None:
            progress = Progress(
                sum(t["trials_asked"] for t in job["tasks"]), label=f"job {job['id']}"
            )
        rates = [t["best_gflops"] for t in job["tasks"] if t["best_gflops"]]
        progress.update(sum(t["trials_done"] for t in job["tasks"]), max(rates, default=None), 0)
    if progress is not None:
        progress.finish()
    print(
        f"job {args.id}: {job.get('status')}" + (f" ({job['error']})" if job.get("error") else "")
    )


def _cancel(client: Client, args: argparse.Namespace) -> None:
    job = client.cancel(args.id)
    print(f"job {job['id']}: {job['status']}")
