"""The ``tensortune`` commands: the argument parser, the ``db`` subcommands, and the
one table that turns a named error into a message and an exit code (the ``tune``,
``best`` and ``records`` commands are in ``tuner.cli.tune_commands``, ``serve`` and
``token`` in ``tuner.cli.service_commands``, the service's clients ``submit``,
``jobs``, ``watch`` and ``cancel`` in ``tuner.cli.client_commands``)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import NoReturn

import db
from compiler.errors import MissingExtraError
from compiler.graph import GraphError
from compiler.runtime.cuda_driver import CudaError
from compiler.target.errors import TargetError
from db import DatabaseError, ImportSummary, RecordError, Role, SQLDatabase, default_url, migrate
from db.engine import in_memory, open_engine, shown
from db.tokens import check_secret
from tuner.cli import (
    client_commands,
    health_commands,
    model_commands,
    node_commands,
    service_commands,
    tune_commands,
)
from tuner.cli.arguments import int_in_range
from tuner.cli.errors import UsageError
from tuner.cli.health_commands import HealthError
from tuner.cli.log_format import LOG_FORMATS, logging_as
from tuner.cli.secret_files import read_secret_file, with_password_file
from tuner.client import ServiceError
from tuner.service.coordinator import CoordinatorError
from workers import WorkersError

PASSWORD_FILE_VARIABLE = "TENSORTUNE_DB_PASSWORD_FILE"
LOG_FORMAT_VARIABLE = "TENSORTUNE_LOG_FORMAT"
# The long-running commands, whose log records a collector reads from standard output;
# the others keep standard output for what they print (an export, a trace) and Python's
# default for their records (warnings, on standard error).
LOGGING_COMMANDS = ("serve", "coordinator")
# The name ``db upgrade --admin-token-file`` registers the deployment's admin token under.
ADMIN_TOKEN_NAME = "admin"

DESCRIPTION = "Find fast schedules for tensor programs and ONNX models, and build with them."
# What each named error exits with, the first that matches; anything else is a bug and
# keeps its traceback. tuner.cli.main's docstring and EPILOG say what each code means.
EXIT_CODES: tuple[tuple[type[Exception], int], ...] = (
    (UsageError, 2),
    (TargetError, 2),
    (GraphError, 2),
    (MissingExtraError, 3),
    (DatabaseError, 1),
    (WorkersError, 1),
    (ServiceError, 1),
    (CoordinatorError, 1),
    (HealthError, 1),
    (CudaError, 1),
    (OSError, 1),
)
EPILOG = (
    "exit codes: 0 done; 1 a failure (the database, the workers, the service, a GPU, a "
    "file); 2 bad input (an option, a workload, a target, a model); 3 an optional part "
    "is not installed (the message names the extra); 130 interrupted"
)


def run(argv: Sequence[str] | None = None) -> int:
    """Run one command line; returns its exit code (see ``tuner.cli.main``)."""
    args = build_parser().parse_args(argv)
    logs = logging_as(args.log_format) if args.command in LOGGING_COMMANDS else nullcontext()
    try:
        with logs:
            args.run(_database_url(args.url), args)
    except tuple(error for error, _ in EXIT_CODES) as err:
        code = next(code for error, code in EXIT_CODES if isinstance(err, error))
        where = f"tensortune {args.command}: error" if code in (2, 3) else "tensortune"
        print(f"{where}: {_one_line(err)}", file=sys.stderr)
        return code
    return 0


def _database_url(given: str | None) -> str:
    """The database a command works on: ``--url``/``--db`` if given, else the default.
    A database in memory is refused: what a command stored there would be lost."""
    if given is None:
        return _with_password(default_url())
    if not given.strip():
        raise UsageError(
            "--db/--url is empty; give a database URL or leave the flag out for "
            f"{shown(default_url())}"
        )
    if in_memory(given):
        raise UsageError(
            f"--db/--url {given!r} is a database in memory, lost when tensortune exits; "
            "give a file (sqlite:///path.db) or a server URL"
        )
    return _with_password(given)


def _with_password(url: str) -> str:
    """``url`` with the password in ``$TENSORTUNE_DB_PASSWORD_FILE`` when that is set
    (a Docker secret) and ``url`` names a server and no password."""
    password_file = os.environ.get(PASSWORD_FILE_VARIABLE)
    return with_password_file(url, password_file, f"${PASSWORD_FILE_VARIABLE}")


def _one_line(err: Exception) -> str:
    return "; ".join(line.strip() for line in str(err).splitlines() if line.strip())


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors on one line (the usage is one ``--help`` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tensortune", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument(
        "--log-format",
        type=_log_format,
        choices=LOG_FORMATS,
        default=os.environ.get(LOG_FORMAT_VARIABLE) or "text",
        help="how serve and coordinator print their log records to standard output: text, "
        f"or json, one object a line (default: ${LOG_FORMAT_VARIABLE}, else text)",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    tune_commands.add_commands(commands)
    service_commands.add_commands(commands)
    client_commands.add_commands(commands)
    node_commands.add_commands(commands)
    model_commands.add_commands(commands)
    health_commands.add_commands(commands)
    db = commands.add_parser("db", help="the tuning database")
    db_commands = db.add_subparsers(dest="db_command", required=True)

    def command(
        name: str, run: Callable[[str, argparse.Namespace], None], help_text: str
    ) -> argparse.ArgumentParser:
        sub = db_commands.add_parser(name, help=help_text)
        sub.add_argument(
            "--url", "--db", dest="url", help="database URL (default: $TENSORTUNE_DB_URL or SQLite)"
        )
        sub.set_defaults(run=run)
        return sub

    upgrade = command("upgrade", _upgrade, "migrate the schema to a revision")
    upgrade.add_argument("--revision", default="head", help="target revision (default: head)")
    upgrade.add_argument(
        "--admin-token-file",
        metavar="FILE",
        help="then make sure an admin token exists whose secret is this file's content "
        "(32 characters or more), registering it if it is new",
    )
    command("current", _current, "print the schema revision")
    export = command("export", _export, "write records as JSON lines")
    export.add_argument(
        "--best", type=int_in_range(1), help="only the K fastest per workload and target"
    )
    export.add_argument("-o", "--output", help="file to write (default: standard output)")
    import_ = command("import", _import, "add the records of a JSON lines export")
    import_.add_argument("file", help="an export file ('-' for standard input)")
    merge = command("merge", _merge, "add every record of another database")
    merge.add_argument("other", help="URL of the database to merge in")
    prune = command("prune", _prune, "delete all but the best records")
    prune.add_argument(
        "--keep", type=int_in_range(1), required=True, help="records kept per workload"
    )
    return parser


def _log_format(value: str) -> str:
    """A ``--log-format``, also when it is the default from the environment, which
    argparse's ``choices`` does not check."""
    if value not in LOG_FORMATS:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a log format (given here or in ${LOG_FORMAT_VARIABLE}); "
            f"give one of {', '.join(LOG_FORMATS)}"
        )
    return value


def _upgrade(url: str, args: argparse.Namespace) -> None:
    """Migrate, then register the deployment's admin token: the secret is checked
    first, so a bad one changes nothing."""
    secret = None if args.admin_token_file is None else _admin_secret(args.admin_token_file)
    engine = open_engine(url)
    try:
        before, after = migrate.upgrade(engine, args.revision)
    finally:
        engine.dispose()
    print(f"{shown(url)}: schema revision {before} -> {after}")
    if secret is not None:
        with db.create(url, create=False) as database:
            token, registered = database.ensure_token(ADMIN_TOKEN_NAME, Role.ADMIN, secret)
        print(f"admin token {token.name}: {'registered' if registered else 'already there'}")


def _admin_secret(path: str) -> str:
    secret = read_secret_file(path, "--admin-token-file").strip()
    try:
        check_secret(secret)
    except RecordError as err:
        raise UsageError(f"--admin-token-file {path!r}: {err}") from None
    return secret


def _current(url: str, args: argparse.Namespace) -> None:
    engine = open_engine(url)
    try:
        revision = migrate.current_revision(engine)
    finally:
        engine.dispose()
    print(f"{shown(url)}: schema revision {revision} (this tensortune: {migrate.head_revision()})")


def _export(url: str, args: argparse.Namespace) -> None:
    with db.create(url) as database:
        if args.output:
            with open(args.output, "w") as out:
                count = database.export_jsonl(out, best_k=args.best)
        else:
            count = database.export_jsonl(sys.stdout, best_k=args.best)
    print(f"exported {count} records", file=sys.stderr)


def _import(url: str, args: argparse.Namespace) -> None:
    with db.create(url) as database:
        try:
            if args.file == "-":
                summary = database.import_jsonl(sys.stdin)
            else:
                with open(args.file, encoding="utf-8") as lines:
                    summary = database.import_jsonl(lines)
        except RecordError as err:
            raise RecordError(f"{args.file}: {err}; nothing from it was stored") from None
    _print_summary(summary)


def _merge(url: str, args: argparse.Namespace) -> None:
    """Merging and pruning are SQL statements over two stored databases, not operations
    of the ``db.Database`` interface: these two commands open ``SQLDatabase`` itself."""
    with SQLDatabase(url) as database, SQLDatabase(args.other, create=False) as other:
        _print_summary(database.merge(other))


def _prune(url: str, args: argparse.Namespace) -> None:
    with SQLDatabase(url) as database:
        print(f"deleted {database.prune(args.keep)} records")


def _print_summary(summary: ImportSummary) -> None:
    print(
        f"added {summary.workloads_added} workloads and {summary.records_added} records; "
        f"skipped {summary.records_skipped} records already there"
    )
