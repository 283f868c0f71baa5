"""``tensortune serve``: the tuning service's API over a database, served by uvicorn."""

from __future__ import annotations

import argparse
from typing import Any

import uvicorn

import db
from tuner.arguments import int_in_range
from tuner.service import create_app

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000


def add_commands(commands: Any) -> None:
    serve = commands.add_parser("serve", help="serve the tuning database over HTTP")
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
    with db.create(url) as database:
        uvicorn.run(create_app(database), host=args.host, port=args.port, log_level="info")
