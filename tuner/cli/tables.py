"""The command line's tables: the best schedules of a tuning run, as ``tensortune
tune`` prints them, and times in milliseconds as every table shows them (``records``
too)."""

from __future__ import annotations

from compiler.schedule.trace import canonical_trace, trace_hash
from tuner.failures import describe_failures
from tuner.tune import TuneResult


def format_table(result: TuneResult) -> str:
    """The best schedules as a table, fastest first, and a line about the run."""
    lines = [
        f"{'rank':>4}  {'GFLOP/s':>9}  {'ms':>9}  {'search GFLOP/s':>14}  trace hash",
    ]
    for rank, row in enumerate(result.best, 1):
        gflops = "-" if row.gflops is None else f"{row.gflops:.2f}"
        ms = milliseconds(row.seconds)
        found = result.task.gflops(row.search_seconds)
        digest = trace_hash(canonical_trace(row.trace))[:12]
        lines.append(f"{rank:>4}  {gflops:>9}  {ms:>9}  {found:>14.2f}  {digest}")
    if not result.best:
        lines.append("   (no successful schedule stored)")
    lines.append(
        f"{result.task!r} {result.space}{_size(result.space_size)}: "
        f"{result.measured} measured this run ({result.errors} errors), {result.restored} "
        f"restored, stopped: {result.stop_reason}, {result.wall_seconds:.1f} s"
    )
    if result.work.builds or result.work.runs:
        lines.append(f"time: {result.work.text()}, the search {result.search_seconds:.1f} s")
    if result.confirmed:
        lines.append(
            f"{result.confirmed} measurements confirmed the fastest or surprising trials "
            "before they steered the search"
        )
    if result.failures:
        lines.append(describe_failures(result.failures))
    if result.transferred:
        lines.append(
            f"the search learned from {result.transferred} records of {result.similar} "
            "similar workloads"
        )
    return "\n".join(lines)


def _size(points: int | None) -> str:
    return "" if points is None else f" (space {points})"


def milliseconds(seconds: float | None) -> str:
    """Seconds as milliseconds for a table, ``-`` for none."""
    return "-" if seconds is None else f"{seconds * 1e3:.4g}"
