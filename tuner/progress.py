"""A live progress line for a tuning run: trials done of the budget, the best GFLOP/s so
far, errors, and the time left at the current pace.

On a terminal the line is redrawn in place; anywhere else (a log file, a pipe, CI)
each update is a plain line of its own, so the log reads as a history.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

BAR_WIDTH = 24


class Progress:
    """Reports ``update`` calls on ``stream`` (default: standard error). ``tty`` forces
    the redrawn line on or off; by default it follows ``stream.isatty()``."""

    def __init__(
        self, total: int, *, label: str = "", stream: TextIO | None = None, tty: bool | None = None
    ) -> None:
        self.total = max(0, total)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.done = 0
        self.best_gflops: float | None = None
        self.errors = 0
        self._start = time.monotonic()
        self._drawn = False

    def update(self, done: int, best_gflops: float | None, errors: int) -> None:
        """The run measured ``done`` trials so far, ``errors`` of them failed."""
        self.done = done
        self.best_gflops = best_gflops
        self.errors = errors
        self._write(self.line())

    def line(self) -> str:
        """The progress as one line of text."""
        total = max(self.total, 1)
        filled = min(BAR_WIDTH, BAR_WIDTH * self.done // total)
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        best = "-" if self.best_gflops is None else f"{self.best_gflops:.2f}"
        prefix = f"{self.label} " if self.label else ""
        return (
            f"{prefix}[{bar}] {self.done}/{self.total} trials | best {best} GFLOP/s | "
            f"{self.errors} errors | {_duration(self.seconds_left())} left"
        )

    def seconds_left(self) -> float | None:
        """The time the remaining trials take at the pace so far; None before the first."""
        if self.done <= 0:
            return None
        elapsed = time.monotonic() - self._start
        return elapsed / self.done * max(0, self.total - self.done)

    def finish(self) -> None:
        """End the redrawn line, so what is printed next starts on a line of its own."""
        if self.tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
        self._drawn = False

    def _write(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r\x1b[2K" + text)
            self._drawn = True
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    whole = round(seconds)
    minutes, secs = divmod(whole, 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"
