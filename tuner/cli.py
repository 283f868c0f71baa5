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
error becomes a message: bad input (an unknown op, a bad shape, an unknown tuner, a
flag out of range) exits with code 2, as argparse does; a database or worker failure,
or a failed health check, exits with code 1; Ctrl-C exits with 130; each prints one
line.

The commands (``tuner.commands``) are imported inside ``main``: importing LLVM,
XGBoost and SQLAlchemy takes a second or more, and a Ctrl-C meanwhile ends with one
line too, not with a traceback from the import machinery.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``tensortune`` command line; returns its exit code."""
    try:
        from tuner.commands import run

        return run(argv)
    except KeyboardInterrupt as err:
        print(f"tensortune: {str(err) or 'interrupted'}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
