"""Replaying a trace on a workload, once per process.

One candidate is needed by several parts of one process: the space that made it,
the loop-nest features that read its lowered program, the build, the database's
trace check, ``build(..., database=...)``. Each asks ``replayed(func, trace)``
here, and only the first replays: the scheduled function (or the ScheduleError
the replay raised) is kept in a bounded LRU keyed by the workload key and the
trace's structural hash, and the lowered function is made once, on first use.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from functools import cached_property

from compiler.ir.function import PrimFunc
from compiler.lower.pipeline import lower_func
from compiler.lower.prepack import split_layout_free
from compiler.schedule.errors import ScheduleError
from compiler.schedule.schedule import Schedule
from compiler.schedule.trace import Trace, canonical_trace, trace_hash
from compiler.workload.key import workload_key

# Scheduled programs kept per process; a search proposes and featurizes a few
# thousand candidates, each a few hundred kilobytes of IR at most.
CACHE_SIZE = 2048


class ScheduledProgram:
    """A workload with a trace replayed on it: the scheduled function, the kernel a
    build runs (without the conversions of constant weights, which a build runs once,
    not per call: ``compiler.lower.prepack``) and the kernel lowered, each made on
    first use."""

    def __init__(self, func: PrimFunc) -> None:
        self.func = func

    @cached_property
    def kernel(self) -> PrimFunc:
        return split_layout_free(self.func)[0]

    @cached_property
    def lowered(self) -> PrimFunc:
        return lower_func(self.kernel)


class ReplayCache:
    """A bounded LRU of replays by (workload key, trace hash); safe across threads."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self._entries: OrderedDict[tuple[str, str], ScheduledProgram | ScheduleError] = (
            OrderedDict()
        )
        self._by_func: dict[int, ScheduledProgram] = {}
        self._lock = threading.Lock()

    def replayed(
        self,
        func: PrimFunc,
        trace: Trace | str,
        *,
        key: str | None = None,
        digest: str | None = None,
    ) -> ScheduledProgram:
        """``trace`` replayed on ``func`` (whose workload key is ``key`` and the trace's
        hash ``digest``, each computed when not given); raises ScheduleError, also
        remembered, when it does not replay."""
        digest = digest or trace_hash(canonical_trace(trace))
        entry_key = (key or workload_key(func), digest)
        with self._lock:
            known = self._entries.get(entry_key)
            if known is not None:
                self._entries.move_to_end(entry_key)
        if known is None:
            known = _replay(func, trace)
            self._store(entry_key, known)
        if isinstance(known, ScheduleError):
            # Raised afresh each time: a kept traceback would grow with every raise and
            # hold the frames of every caller it passed through.
            raise known.with_traceback(None)
        return known

    def remember(self, key: str, digest: str, func: PrimFunc) -> ScheduledProgram:
        """Keep a function already scheduled by the trace of hash ``digest`` (a space
        that ran a schedule function has it), so nobody replays that trace again."""
        program = ScheduledProgram(func)
        self._store((key, digest), program)
        return program

    def lowered(self, func: PrimFunc) -> PrimFunc:
        """``func`` lowered, reusing the lowering of a cached program when ``func`` is
        its kernel (``build`` of a replayed module), else lowering it here."""
        with self._lock:
            program = self._by_func.get(id(func))
        if program is None or program.func is not func or program.kernel is not func:
            return lower_func(func)
        return program.lowered

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._by_func.clear()

    def _store(self, entry_key: tuple[str, str], value: ScheduledProgram | ScheduleError) -> None:
        with self._lock:
            self._entries[entry_key] = value
            self._entries.move_to_end(entry_key)
            if isinstance(value, ScheduledProgram):
                self._by_func[id(value.func)] = value
            while len(self._entries) > self.size:
                _, dropped = self._entries.popitem(last=False)
                if isinstance(dropped, ScheduledProgram):
                    self._by_func.pop(id(dropped.func), None)


def _replay(func: PrimFunc, trace: Trace | str) -> ScheduledProgram | ScheduleError:
    try:
        parsed = trace if isinstance(trace, Trace) else Trace.from_json(trace)
        sch = Schedule(func)
        parsed.apply_to_schedule(sch)
    except ScheduleError as err:
        return err.with_traceback(None)
    return ScheduledProgram(sch.mod["main"])


REPLAYS = ReplayCache()


def replayed(func: PrimFunc, trace: Trace | str, *, key: str | None = None) -> ScheduledProgram:
    """``trace`` replayed on ``func`` through the process's cache (``REPLAYS``)."""
    return REPLAYS.replayed(func, trace, key=key)
