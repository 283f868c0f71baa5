"""Which files this process opens, from Python's audit events: ``open`` is raised by
every ``open()``, ``io.open`` and ``os.open``, in every thread (an in-process server's
too). A hook cannot be removed once added, so one hook serves every watch."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

_WATCHES: list[list[Path]] = []


def _on_event(event: str, args: tuple[Any, ...]) -> None:
    if event != "open" or not _WATCHES or not isinstance(args[0], str | bytes | os.PathLike):
        return
    path = Path(os.fsdecode(args[0])).absolute()
    for watch in _WATCHES:
        watch.append(path)


sys.addaudithook(_on_event)


@contextmanager
def files_opened() -> Iterator[list[Path]]:
    """The absolute paths this process opens while in the block (relative ones taken
    from the working directory of the moment)."""
    watch: list[Path] = []
    _WATCHES.append(watch)
    try:
        yield watch
    finally:
        _WATCHES.remove(watch)
