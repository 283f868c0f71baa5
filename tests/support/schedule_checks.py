"""Checks every schedule primitive's tests make: a refused move leaves the schedule as
it was, and a schedule's trace replays to the same program."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from compiler.ir import PrimFunc
from compiler.schedule import Schedule, ScheduleError
from compiler.schedule.trace import Trace


def assert_refused(sch: Schedule, call: Callable[..., object], *args: object, match: str) -> None:
    """``call(*args)`` raises ScheduleError matching ``match`` and changes neither the
    program nor the trace."""
    before_text = sch.mod.script()
    before_trace = str(sch.trace)
    with pytest.raises(ScheduleError, match=match):
        call(*args)
    assert sch.mod.script() == before_text
    assert str(sch.trace) == before_trace


def assert_replays(sch: Schedule, workload: PrimFunc) -> None:
    """The schedule's trace, through JSON, replays on ``workload`` to the same program
    and the same trace."""
    fresh = Schedule(workload)
    Trace.from_json(sch.trace.to_json_string()).apply_to_schedule(fresh)
    assert fresh.mod.script() == sch.mod.script()
    assert fresh.trace.structural_hash == sch.trace.structural_hash
