"""The ``tensortune`` command line: tune, look up the best schedules, keep the database.

    tensortune tune matmul --shape M N K [--trials N] [--tuner xgb]   tune one workload
    tensortune tune --spec '{"op": ..., "args": {...}}'  (or a spec JSON file)
    tensortune tune ... --space module:function   search a schedule function f(sch)
    tensortune best matmul --shape M N K [--target T]  the best trace as Python calls
    tensortune records [matmul --shape M N K | KEY]     stored records, newest first, paged
    tensortune tune-model model.onnx [--trials N]   tune every task of a model, one budget
    tensortune run model.onnx [--inputs x.npz] [--output y.npz]   run it, print the latency
    tensortune ray-node --head | --address HOST:PORT [--target T]   a node of a cluster
    tensortune db upgrade [--url URL]          bring the schema to this version's
        [--admin-token-file FILE]              and register FILE's secret as an admin token
    tensortune db current [--url URL]          the schema revision
    tensortune db export [--best K] [-o FILE]  records as JSON lines
    tensortune db import FILE                  add an export's records
    tensortune db merge OTHER_URL              add another database's records
    tensortune db prune --keep K               keep the K best per workload and target
    tensortune health [--server URL] [--db [--url URL]]  exit 0 when they answer, else 1
    tensortune --log-format json serve|coordinator ...   log records as JSON lines

``--url`` (``--db``) defaults to ``$TENSORTUNE_DB_URL``, else the embedded SQLite
file; a server URL without a password gets the content of the file
``$TENSORTUNE_DB_PASSWORD_FILE`` names (a Docker secret) as its password.
``--log-format`` defaults to ``$TENSORTUNE_LOG_FORMAT``, else ``text``. The
environment is read here, once, and nowhere deeper. ``main`` is the one place a named
error becomes a message of one line and an exit code (``tuner.cli.commands.EXIT_CODES``):

    0    done
    1    a failure: the database, the workers, the service, a GPU, a file; a failed
         health check
    2    bad input: an unknown op, a bad shape or target, an unknown tuner, a flag out
         of range, a model that does not import (as argparse does)
    3    an optional part of tensortune is not installed; the message names the extra
         (``pip install 'tensortune[cuda]'``)
    130  Ctrl-C

The commands (``tuner.cli.commands``) are imported inside ``main``: importing LLVM,
XGBoost and SQLAlchemy takes a second or more, and a Ctrl-C meanwhile ends with one
line too, not with a traceback from the import machinery. A Ctrl-C that lands while
a library logs what it was doing (SQLAlchemy, returning a connection to its pool,
logs the interrupted reset with its traceback) is not printed by Python's handler of
last resort either: the one line says it.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``tensortune`` command line; returns its exit code."""
    if logging.lastResort is not None:
        logging.lastResort.addFilter(_not_an_interrupt)
    try:
        from tuner.cli.commands import run  # start-up: see the module's docstring

        return run(argv)
    except KeyboardInterrupt as err:
        print(f"tensortune: {str(err) or 'interrupted'}", file=sys.stderr)
        return 130
    except Exception as err:
        if not _after_an_interrupt(err):
            raise
        print("tensortune: interrupted", file=sys.stderr)
        return 130


def _after_an_interrupt(err: BaseException) -> bool:
    """Whether a Ctrl-C underlies ``err``: a library's clean-up cut short by one can
    fail with an error of its own (SQLAlchemy's transaction close asserts), raised
    while handling the KeyboardInterrupt."""
    cause = err.__context__
    while cause is not None:
        if isinstance(cause, KeyboardInterrupt):
            return True
        cause = cause.__context__
    return False


def _not_an_interrupt(record: logging.LogRecord) -> bool:
    return record.exc_info is None or not isinstance(record.exc_info[1], KeyboardInterrupt)


if __name__ == "__main__":
    sys.exit(main())
