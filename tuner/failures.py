"""Why trials failed, told where a run reports: failures grouped by kind, each group
with its count and the first message, so a run whose every trial fails says why
without a trip through ``db export``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from compiler.errors import ErrorKind

MESSAGE_WIDTH = 100


@dataclass(frozen=True)
class FailureGroup:
    """``count`` failures of ``kind``; ``first_message`` is the first one's message."""

    kind: ErrorKind
    count: int
    first_message: str


def group_failures(failures: Iterable[tuple[ErrorKind, str]]) -> tuple[FailureGroup, ...]:
    """The failures grouped by kind, the most frequent kind first."""
    counts: dict[ErrorKind, int] = {}
    first: dict[ErrorKind, str] = {}
    for kind, message in failures:
        counts[kind] = counts.get(kind, 0) + 1
        first.setdefault(kind, message)
    groups = [FailureGroup(kind, counts[kind], first[kind]) for kind in counts]
    return tuple(sorted(groups, key=lambda group: -group.count))


def describe_failures(groups: Iterable[FailureGroup]) -> str:
    """One line: ``8 failed: 8 run_error (MemoryError: ...)``; empty when none failed."""
    groups = tuple(groups)
    if not groups:
        return ""
    total = sum(group.count for group in groups)
    parts = [f"{g.count} {g.kind.value} ({one_line(g.first_message)})" for g in groups]
    return f"{total} failed: " + "; ".join(parts)


def one_line(message: str | None, width: int = MESSAGE_WIDTH) -> str:
    """The first non-blank line of ``message``, cut to ``width`` characters."""
    lines = [line.strip() for line in (message or "").splitlines() if line.strip()]
    line = lines[0] if lines else ""
    return line if len(line) <= width else line[: width - 3] + "..."
