"""The service's commands: ``tensortune serve`` (the API over a database, served by
uvicorn, and a coordinator thread that runs the submitted jobs), ``tensortune
coordinator`` (a coordinator alone, to run beside a server or several on one
PostgreSQL) and ``tensortune token create|list|revoke`` (the API tokens, kept in the
database). Both run their jobs on local workers or on a Ray cluster (``--workers``,
``--ray-address``)."""

from __future__ import annotations

import argparse
import gc
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from fastapi import FastAPI

import db
import workers
from db import Role
from db.engine import shown
from tuner.cli.arguments import int_in_range
from tuner.cli.tune_commands import backend_of, worker_arguments
from tuner.service import create_app
from tuner.service.coordinator import Coordinator, CoordinatorError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
# How long an idle coordinator waits before it looks for jobs again; a job submitted
# through this process's API wakes it at once.
IDLE_SECONDS = 5.0
# How long a stopping server waits for its open requests: an event stream lasts as
# long as its job, and without a bound one watcher kept a SIGTERMed server running.
SHUTDOWN_GRACE_SECONDS = 3


def add_commands(commands: Any) -> None:
    serve = commands.add_parser("serve", help="serve tuning jobs and the database over HTTP")
    serve.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"address to listen on (default {DEFAULT_HOST}: this machine only)",
    )
    serve.add_argument(
        "--port",
        type=int_in_range(0, 65535),
        default=DEFAULT_PORT,
        help=f"port to listen on (default {DEFAULT_PORT}; 0 picks a free one)",
    )
    serve.add_argument(
        "--anonymous-reads",
        action="store_true",
        help="answer reads without a token (submitting and cancelling always need one)",
    )
    serve.add_argument(
        "--metrics-token",
        action="store_true",
        help="answer GET /metrics only with an API token (any role; a scraper sends it "
        "as 'Authorization: Bearer'); by default anyone who reaches the server reads it",
    )
    serve.add_argument(
        "--access-log",
        action="store_true",
        help="log every request (off by default: GET /metrics has their latency by route)",
    )
    serve.add_argument(
        "--no-coordinator",
        dest="coordinator",
        action="store_false",
        help="serve the API only: jobs wait for a tensortune coordinator running apart",
    )
    serve.add_argument("--url", "--db", dest="url", help="database URL (default: SQLite)")
    worker_arguments(serve)
    serve.set_defaults(run=run_serve)

    coordinator = commands.add_parser(
        "coordinator", help="run the queued jobs of a database (beside a serve, or many)"
    )
    coordinator.add_argument("--url", "--db", dest="url", help="database URL (default: SQLite)")
    worker_arguments(coordinator)
    coordinator.set_defaults(run=run_coordinator)

    token = commands.add_parser("token", help="API tokens of the service")
    actions = token.add_subparsers(dest="token_command", required=True)
    create = actions.add_parser("create", help="make a token and print its secret once")
    create.add_argument("--role", required=True, choices=[r.value for r in Role])
    create.add_argument(
        "--quota", type=int_in_range(0), help="most unfinished jobs at once (default: no limit)"
    )
    create.add_argument(
        "--upload-limit-mib",
        type=int_in_range(1),
        help="largest model file it may upload, in MiB (default: the server's limit)",
    )
    create.add_argument("--name", default="", help="who or what it is for (default: the role)")
    create.set_defaults(run=run_token_create)
    listing = actions.add_parser("list", help="the tokens, revoked ones too")
    listing.set_defaults(run=run_token_list)
    revoke = actions.add_parser("revoke", help="revoke a token: it stops working at once")
    revoke.add_argument("id", type=int_in_range(1), help="the token's id (see token list)")
    revoke.set_defaults(run=run_token_revoke)
    for action in (create, listing, revoke):
        action.add_argument("--url", "--db", dest="url", help="database URL (default: SQLite)")


def run_serve(url: str, args: argparse.Namespace) -> None:
    """Serve until interrupted; a job running then goes back to the queue after its
    current batch, to resume from its records when the service starts again. With
    ``--no-coordinator`` the server only stores jobs, for coordinators running apart."""
    if not args.coordinator:
        with db.create(url) as database:
            app = create_app(
                database, anonymous_reads=args.anonymous_reads, metrics_token=args.metrics_token
            )
            _serve(app, args)
        return
    kind, options = backend_of(args)
    with db.create(url) as database, workers.create(kind, **options) as backend:
        wake = threading.Event()
        with _coordinating(Coordinator(database, backend), wake) as running:
            app = create_app(
                database,
                anonymous_reads=args.anonymous_reads,
                metrics_token=args.metrics_token,
                submitted=wake.set,
                workers_health=lambda: _workers_health(kind, running),
            )
            _serve(app, args)


def _serve(app: FastAPI, args: argparse.Namespace) -> None:
    gc.freeze()  # what was made to start lives as long as the server: never scan it
    shown_host = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
    print(f"tensortune: the dashboard is at http://{shown_host}:{args.port}/", file=sys.stderr)
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level="info",
        access_log=args.access_log,
        log_config=None,  # its loggers propagate to the one handler of --log-format
        timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
    )


def _workers_health(kind: str, coordinator: threading.Thread) -> str:
    """'ok', or what stops this server's jobs from running."""
    if not coordinator.is_alive():
        return "the coordinator has stopped; its error is in the server's log"
    if kind == "ray":
        from workers.ray_backend import alive_nodes

        if not alive_nodes():
            return "no Ray node is alive"
    return "ok"


def run_coordinator(url: str, args: argparse.Namespace) -> None:
    """Run queued jobs until interrupted (Ctrl-C): the running job then goes back to
    the queue after its current batch. Several coordinators may share one database."""
    kind, options = backend_of(args)
    with db.create(url) as database, workers.create(kind, **options) as backend:
        coordinator = Coordinator(database, backend)
        print(
            f"coordinator {coordinator.name}: running the queued jobs of {shown(url)}",
            file=sys.stderr,
        )
        with _coordinating(coordinator, threading.Event()) as running:
            while running.is_alive():
                running.join(timeout=IDLE_SECONDS)
    if coordinator.failure is not None:
        failure = coordinator.failure
        raise CoordinatorError(f"the coordinator stopped: {type(failure).__name__}: {failure}")


@contextmanager
def _coordinating(coordinator: Coordinator, wake: threading.Event) -> Iterator[threading.Thread]:
    """The coordinator running in a thread of its own while the block runs; when the
    block ends (or is interrupted), it stops after its current batch."""
    running = threading.Thread(
        target=coordinator.run_until_stopped, args=(wake, IDLE_SECONDS), name="coordinator"
    )
    running.start()
    try:
        yield running
    finally:
        coordinator.stopping.set()
        wake.set()
        running.join()


def run_token_create(url: str, args: argparse.Namespace) -> None:
    with db.create(url) as database:
        limit = None if args.upload_limit_mib is None else args.upload_limit_mib << 20
        token, secret = database.create_token(
            args.name or args.role, Role(args.role), quota=args.quota, upload_limit=limit
        )
    print(secret)
    quota = "no quota" if token.quota is None else f"quota {token.quota}"
    uploads = "" if limit is None else f", uploads up to {args.upload_limit_mib} MiB"
    print(
        f"# token {token.id} {token.name!r}: role {token.role.value}, {quota}{uploads}; the "
        "secret above is shown only now",
        file=sys.stderr,
    )


def run_token_list(url: str, args: argparse.Namespace) -> None:
    with db.create(url) as database:
        listed = database.tokens()
    print(f"{'id':>5}  {'role':6}  {'quota':>5}  {'revoked':10}  name")
    for token in listed:
        quota = "-" if token.quota is None else str(token.quota)
        revoked = "-" if token.revoked_at is None else token.revoked_at.date().isoformat()
        print(f"{token.id:>5}  {token.role.value:6}  {quota:>5}  {revoked:10}  {token.name}")


def run_token_revoke(url: str, args: argparse.Namespace) -> None:
    with db.create(url) as database:
        token = database.revoke_token(args.id)
    print(f"token {token.id} {token.name!r} revoked")
