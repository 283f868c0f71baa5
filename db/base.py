"""``Database``: what every tuning database does, whatever stores the records.

A database holds workloads (canonical JSON under their key) and records (one
measurement of one trace of a workload on one canonical target). Records are
append-only: a measurement, successful or not, is committed once and never changed;
a careful re-timing of a trace is one more record (``Purpose.RETIME``), so the
search measurement it re-times stays as it was. A batch is checked whole (workload
known, run times real, trace replays on its workload) before any of it is stored,
so a bad record leaves the database as it was.

The six abstract methods are the contract (``tests/contracts/test_database_contract.py``
runs it over every implementation); ``count``, ``export_jsonl``, ``record``,
``workload``, ``best_trace``, ``targets`` (what ``compiler.build(..., database=db)``
asks) and the context manager are built on them. ``import_jsonl`` stays abstract: it
stores records as they were written elsewhere (their times and versions), which
``commit_records`` never does.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Iterable, Mapping
from typing import IO, Any, Self

from db import exchange
from db.compiler_border import TRACE_FORMAT_VERSION, ErrorKind, PrimFunc, target_host_kind
from db.errors import RecordError
from db.exchange import ImportSummary
from db.record import Measurement, Purpose, TuningRecord, WorkloadEntry
from db.validate import INT64_MAX, MAX_PAGE, check_k

logger = logging.getLogger(__name__)


class Database(abc.ABC):
    @abc.abstractmethod
    def commit_workload(
        self,
        workload: PrimFunc | Mapping[str, Any],
        *,
        name: str | None = None,
        flop_count: int | None = None,
    ) -> WorkloadEntry:
        """Store a workload (a PrimFunc or an operator spec such as ``{"op": "matmul",
        "args": {...}}``) and return its entry; committing it again changes nothing."""

    @abc.abstractmethod
    def workloads(self, keys: Iterable[str] | None = None) -> list[WorkloadEntry]:
        """The stored workloads (those of ``keys`` only, when given), oldest first."""

    @abc.abstractmethod
    def commit_records(self, measurements: Iterable[Measurement], *, built: bool = False) -> int:
        """Store every measurement at once and return how many; raises RecordError
        naming the first bad one (``records[i]``), storing none. ``built``: the
        caller's workers built every successful measurement's trace on its workload (a
        tuning loop's), so a success's trace applies and is not replayed again; a
        failure's, and every trace from outside (an import, a request), is."""

    @abc.abstractmethod
    def best(
        self, workload_key: str, target: str, k: int = 1, *, purpose: Purpose | None = None
    ) -> list[TuningRecord]:
        """The ``k`` best current-format successes of the workload on the target, each
        ranked by ``TuningRecord.seconds`` (its fastest run). A trace that was re-timed
        ranks by the fastest of all its re-timings, ahead of the traces ranked by their
        search measurement: a tuning run re-times its fastest schedules, so a lucky search
        measurement ranks behind them, and one re-timing slowed by a loaded host never
        hides the trace's earlier ones. A trace measured twice by a search (a
        confirmation) ranks by its faster search measurement. With ``purpose`` SEARCH:
        every searched trace by its search measurements (what a tuning run re-times);
        RETIME: only the re-timed traces. Each trace appears once. Ties go to the older
        record."""

    @abc.abstractmethod
    def records(
        self,
        workload_key: str | None = None,
        target: str | None = None,
        *,
        job_id: int | None = None,
        purpose: Purpose | None = None,
        limit: int = 100,
        before_id: int | None = None,
    ) -> list[TuningRecord]:
        """Records newest first, of a workload (on a target), of a job, of a purpose.
        Page by passing the last record's ``id`` as ``before_id``."""

    @abc.abstractmethod
    def import_jsonl(self, lines: Iterable[str]) -> ImportSummary:
        """Add the workloads and records of an ``export_jsonl`` stream at once, keeping
        their versions; records already here are skipped. Raises RecordError naming
        the first bad line, storing nothing."""

    def count(
        self,
        workload_key: str | None = None,
        target: str | None = None,
        error_kind: ErrorKind | None = None,
        *,
        ok: bool | None = None,
        stale: bool | None = None,
    ) -> int:
        """How many records there are: of a workload, on a target, that failed with
        ``error_kind``, that succeeded (``ok``), of an older trace format or of the current
        one (``stale``); each filter applies when given."""
        return sum(
            1
            for r in self._all_records(workload_key, target)
            if (error_kind is None or r.error_kind is error_kind)
            and (ok is None or r.ok == ok)
            and (stale is None or r.stale == stale)
        )

    def export_jsonl(self, out: IO[str], *, best_k: int | None = None) -> int:
        """Write every workload and record (or only the records of the ``best_k`` best
        traces of each workload on each target) as JSON lines (``db.exchange``), records
        in the order they were committed; returns the records written."""
        if best_k is not None:
            check_k(best_k)
        kept = list(self._all_records())[::-1]
        if best_k is not None:
            kept = self._of_best_traces(kept, best_k)
        return exchange.write_stream(
            out, self.workloads(), ((record, self._host_kind(record.target)) for record in kept)
        )

    def _of_best_traces(self, records: list[TuningRecord], k: int) -> list[TuningRecord]:
        """The current-format successes among ``records`` of the ``k`` best traces of
        each workload on each target."""
        best = set()
        for key, target in {(r.workload_key, r.target) for r in records}:
            best |= {(key, target, r.trace_hash) for r in self.best(key, target, k)}
        return [
            r
            for r in records
            if (r.workload_key, r.target, r.trace_hash) in best and r.ok and not r.stale
        ]

    def _host_kind(self, target: str) -> str:
        """The host description an export gives the records of ``target``."""
        return target_host_kind(target)

    def close(self) -> None:
        """Release connections; a database without any has nothing to do."""
        return None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def workload(self, key: str) -> WorkloadEntry:
        found = self.workloads([key])
        if not found:
            raise RecordError(f"no workload with key {key!r}; commit it with commit_workload")
        return found[0]

    def best_trace(self, workload_key: str, target: str) -> str | None:
        """The best trace's JSON, for ``compiler.build(..., database=db)``. Logs a
        warning when successes written in an older trace format exist: they are
        stale and never applied."""
        best = self.best(workload_key, target)
        stale = self.count(workload_key, target, ok=True, stale=True)
        if stale:
            logger.warning(
                "workload %s on %s: %d records are stale (another trace format than "
                "version %d); they are not applied: tune again to replace them",
                workload_key[:12],
                target,
                stale,
                TRACE_FORMAT_VERSION,
            )
        return best[0].trace if best else None

    def best_seconds(self, workload_key: str, target: str) -> float | None:
        """The run time of ``best_trace``'s trace (a model's build compares
        alternative algorithms of one operator by it)."""
        best = self.best(workload_key, target)
        return best[0].seconds if best else None

    def targets(self, workload_key: str) -> list[str]:
        """The canonical targets the workload has records on."""
        return sorted({r.target for r in self._all_records(workload_key)})

    def record(self, record_id: int) -> TuningRecord:
        """The record of ``record_id``; RecordError when there is none."""
        if type(record_id) is int and 1 <= record_id < INT64_MAX:
            found = self.records(limit=1, before_id=record_id + 1)
            if found and found[0].id == record_id:
                return found[0]
        raise RecordError(f"no record with id {record_id!r}")

    def _all_records(
        self, workload_key: str | None = None, target: str | None = None
    ) -> Iterable[TuningRecord]:
        """Every record (of a workload, on a target), newest first, a page at a time."""
        before: int | None = None
        while True:
            page = self.records(workload_key, target, limit=MAX_PAGE, before_id=before)
            yield from page
            if len(page) < MAX_PAGE:
                return
            before = page[-1].id
