"""``tensortune health``: whether a server answers and whether a database opens, for a
container's health check or an operator; one line per check, exit code 1 when any
fails. The server is asked with the standard library's HTTP client, with a timeout:
a health check must end on its own when the server hangs."""

from __future__ import annotations

import argparse
import json
import urllib.error
import urllib.request
from typing import Any

import db
from db import DatabaseError
from db.engine import shown
from tuner.cli.errors import UsageError

DEFAULT_TIMEOUT_S = 5.0
MAX_TIMEOUT_S = 300.0


class HealthError(Exception):
    """A check failed: the server is down or unwell, the database is out of reach."""


def add_commands(commands: Any) -> None:
    health = commands.add_parser(
        "health",
        help="check that a server answers or a database opens (exit 1 when not)",
        description="Check a tensortune server (GET /healthz answers 200) and/or a "
        "tuning database (it opens at this tensortune's schema revision and answers a "
        "query); one line per check, exit code 0 when all pass, 1 when one fails.",
    )
    health.add_argument(
        "--server",
        type=_http_url,
        metavar="URL",
        help="the server's URL, e.g. http://127.0.0.1:8000",
    )
    health.add_argument(
        "--db",
        action="store_true",
        help="check the database of --url (default: $TENSORTUNE_DB_URL or SQLite)",
    )
    health.add_argument("--url", help="database URL for --db")
    health.add_argument(
        "--timeout",
        type=_seconds,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"seconds to wait for the server (default {DEFAULT_TIMEOUT_S:g})",
    )
    health.set_defaults(run=run_health)


def run_health(url: str, args: argparse.Namespace) -> None:
    """Run the checks asked for, each to its end, and print how each went."""
    if args.server is None and not args.db:
        raise UsageError("give --server URL, --db, or both")
    problems = []
    if args.server is not None:
        problems.append(_server_problem(args.server, args.timeout))
    if args.db:
        problems.append(_database_problem(url))
    failed = [problem for problem in problems if problem is not None]
    if failed:
        raise HealthError(f"{len(failed)} of {len(problems)} health checks failed")


def _server_problem(server: str, timeout_s: float) -> str | None:
    """What is wrong with the server at ``server``, printed; None when /healthz is 200."""
    endpoint = server.rstrip("/") + "/healthz"
    try:
        status, body = _get(endpoint, timeout_s)
    except urllib.error.URLError as err:
        problem = f"cannot reach {endpoint}: {err.reason}"
    except TimeoutError:
        problem = f"{endpoint} did not answer within {timeout_s:g} s"
    else:
        if status == 200:
            print(f"ok: {endpoint} answered 200")
            return None
        problem = f"{endpoint} answered {status}: {_compact(body.decode(errors='replace'))}"
    print(f"failed: {problem}")
    return problem


def _get(endpoint: str, timeout_s: float) -> tuple[int, bytes]:
    """The status and body of a GET, an error status (which urllib raises) too."""
    try:
        with urllib.request.urlopen(endpoint, timeout=timeout_s) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def _database_problem(url: str) -> str | None:
    """What is wrong with the database at ``url``, printed; None when it opens at this
    tensortune's schema revision and answers a query."""
    try:
        with db.create(url, create=False) as database:
            database.job_counts()
    except DatabaseError as err:
        problem = _compact(str(err))
        print(f"failed: {problem}")
        return problem
    print(f"ok: the tuning database {shown(url)} answers")
    return None


def _compact(text: str) -> str:
    """A server's answer or an error on one line, a JSON body without its spaces."""
    try:
        text = json.dumps(json.loads(text), separators=(",", ":"))
    except ValueError:
        pass
    return " ".join(text.split())[:500]


def _http_url(value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError(f"give an http:// or https:// URL, got {value!r}")
    return value


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds <= MAX_TIMEOUT_S:
        raise argparse.ArgumentTypeError(
            f"give a number of seconds above 0 and at most {MAX_TIMEOUT_S:g}, got {value!r}"
        )
    return seconds
