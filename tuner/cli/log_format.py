"""How tensortune's log records come out: ``text``, as uvicorn has always printed its
own (``INFO:     message``), or ``json``, one object per line for a log collector.
Either way they go to standard output through one handler on the root logger, at
INFO, so that uvicorn's records, the coordinator's and the workers' come out alike
(``tensortune serve`` lets uvicorn's loggers propagate to it)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter
from uvicorn.logging import DefaultFormatter

LOG_FORMATS = ("text", "json")
# Record attributes that are not fields of a JSON line: uvicorn adds ``color_message``
# (its message with terminal colours) to some records; Python 3.12 adds ``taskName``.
NOT_FIELDS = (*RESERVED_ATTRS, "color_message", "taskName")
# Libraries whose INFO records say what a command says itself, only less plainly: httpx
# logs every request of a client command; alembic every database opened and every
# migration step of ``db upgrade``, which prints the revisions it moved between.
CHATTY = ("httpx", "alembic")


@contextmanager
def logging_as(log_format: str) -> Iterator[None]:
    """Log INFO and above to standard output in ``log_format`` while the block runs.
    The root logger's level and handlers are as they were after it, so a process that
    runs several command lines (a test) gets one handler at a time."""
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(_formatter(log_format))
    handler.addFilter(_not_chatter)
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def _not_chatter(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.WARNING or record.name.split(".")[0] not in CHATTY


def _formatter(log_format: str) -> logging.Formatter:
    if log_format == "json":
        return JsonFormatter(
            "%(levelname)s %(name)s %(message)s",
            rename_fields={"levelname": "level", "name": "logger"},
            timestamp="time",
            reserved_attrs=NOT_FIELDS,
        )
    if log_format == "text":
        return DefaultFormatter("%(levelprefix)s %(message)s")
    raise ValueError(f"log format {log_format!r}: give one of {', '.join(LOG_FORMATS)}")
