"""``tensortune serve``: the tuning service in one process: the API over a database,
served by uvicorn, and a coordinator thread that runs the submitted jobs on local
workers."""

from __future__ import annotations

import argparse
import threading
from typing import Any

import uvicorn

import workers
from db import SQLDatabase
from tuner.arguments import int_in_range
from tuner.service import create_app
from tuner.service.coordinator import Coordinator

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
# How long an idle coordinator waits before it looks for jobs again; a job submitted
# through this process's API wakes it at once.
IDLE_SECONDS = 5.0


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
    serve.add_argument("--url", "--db", dest="url", help="database URL (default: SQLite)")
    serve.set_defaults(run=run_serve)


def run_serve(url: str, args: argparse.Namespace) -> None:
    """Serve until interrupted; a job running then goes back to the queue after its
    current batch, to resume from its records when the service starts again."""
    with SQLDatabase(url) as database, workers.create("local") as backend:
        coordinator = Coordinator(database, backend)
        wake = threading.Event()
        running = threading.Thread(
            target=coordinator.run_until_stopped, args=(wake, IDLE_SECONDS), name="coordinator"
        )
        running.start()
        try:
            app = create_app(database, submitted=wake.set)
            uvicorn.run(app, host=args.host, port=args.port, log_level="info", lifespan="off")
        finally:
            coordinator.stopping.set()
            wake.set()
            running.join()
