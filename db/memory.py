"""``MemoryDatabase``: a ``db.store.TuningStore`` held in this process.

For tests and one-off runs that need no file: records live in a list, in the order
they were committed, and vanish with the object (jobs, tokens and model files with
them: ``db.memory_stores``). It checks what it stores exactly as
``SQLDatabase`` does (the same checks of ``db.validate``), so code tested against it
behaves the same against SQL.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import Any

from db import exchange
from db.compiler_border import PrimFunc, canonical_trace, target_host_kind, trace_hash
from db.history import JobBest
from db.memory_stores import MemoryStores
from db.record import (
    STATUSES,
    Measurement,
    Purpose,
    TuningRecord,
    WorkloadEntry,
    error_kind_of,
    status_of,
)
from db.store import TuningStore
from db.validate import (
    TraceChecker,
    check_fields,
    check_k,
    check_page,
    checked_rows,
    checked_workload,
    target_key,
)

VERSION = "0+memory"


class MemoryDatabase(MemoryStores, TuningStore):
    def __init__(self) -> None:
        super().__init__()
        self.url = None
        self._workloads: dict[str, WorkloadEntry] = {}
        self._records: list[TuningRecord] = []
        self._host_kinds: dict[str, str] = {}
        self._checker = TraceChecker()

    def __repr__(self) -> str:
        return f"MemoryDatabase({len(self._workloads)} workloads, {len(self._records)} records)"

    def commit_workload(
        self,
        workload: PrimFunc | Mapping[str, Any],
        *,
        name: str | None = None,
        flop_count: int | None = None,
    ) -> WorkloadEntry:
        row = checked_workload(workload, name, flop_count)
        self._workloads.setdefault(
            row["key"], WorkloadEntry(row["key"], row["name"], row["json"], row["flop_count"])
        )
        return self._workloads[row["key"]]

    def workloads(self, keys: Iterable[str] | None = None) -> list[WorkloadEntry]:
        if keys is None:
            return list(self._workloads.values())
        wanted = set(keys)
        return [w for key, w in self._workloads.items() if key in wanted]

    def commit_records(self, measurements: Iterable[Measurement], *, built: bool = False) -> int:
        batch = list(measurements)
        for i, measurement in enumerate(batch):
            check_fields(measurement, f"records[{i}]")
        for key, digest in self._stored_hashes(batch):
            self._checker.remember(key, digest)
        workloads = {key: w.json for key, w in self._workloads.items()}
        rows = checked_rows(batch, workloads, self._checker, VERSION, built=built)
        self._check_jobs_exist({m.job_id for m in batch if m.job_id is not None})
        for (row, target), measurement in zip(rows, batch, strict=True):
            self._append(row, measurement.workload_key, target)
        return len(rows)

    def _stored_hashes(self, batch: list[Measurement]) -> set[tuple[str, str]]:
        hashes = {trace_hash(canonical_trace(m.trace)) for m in batch}
        return {
            (r.workload_key, r.trace_hash)
            for r in self._records
            if r.trace_hash in hashes and not r.stale
        }

    def _append(self, row: dict[str, Any], workload_key: str, target: str) -> None:
        self._host_kinds.setdefault(target, target_host_kind(target))
        self._records.append(
            TuningRecord(
                id=len(self._records) + 1,
                workload_key=workload_key,
                target=target,
                trace=row["trace"],
                trace_hash=row["trace_hash"],
                error_kind=error_kind_of(row["status"]),
                run_times=tuple(row["run_times"]),
                mean_seconds=row["mean_seconds"],
                min_seconds=row["min_seconds"],
                error=row["error"],
                worker_host=row["worker_host"],
                job_id=row["job_id"],
                created_at=row["created_at"],
                trace_version=row["trace_version"],
                tensortune_version=row["tensortune_version"],
                purpose=Purpose(row["purpose"]),
            )
        )

    def best(
        self, workload_key: str, target: str, k: int = 1, *, purpose: Purpose | None = None
    ) -> list[TuningRecord]:
        check_k(k)
        target = target_key(target, "target")
        current = [
            r
            for r in self._records
            if r.workload_key == workload_key and r.target == target and r.ok and not r.stale
        ]
        fastest: dict[tuple[Purpose, str], TuningRecord] = {}
        for r in sorted(current, key=lambda r: (r.min_seconds, r.id), reverse=True):
            fastest[(r.purpose, r.trace_hash)] = r
        retimed = {digest for of, digest in fastest if of is Purpose.RETIME}
        found: list[TuningRecord] = []
        for of in (Purpose.RETIME, Purpose.SEARCH):
            if purpose not in (None, of):
                continue
            # Without a purpose, a re-timed trace ranks by its re-timings alone.
            shadowed = retimed if purpose is None and of is Purpose.SEARCH else set()
            kept = [
                r
                for (record_of, digest), r in fastest.items()
                if record_of is of and digest not in shadowed
            ]
            found += sorted(kept, key=lambda r: (r.min_seconds, r.id))[: k - len(found)]
        return found

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
        check_page(limit, before_id)
        found = []
        for record in reversed(list(self._matching(workload_key, target))):
            if job_id is not None and record.job_id != job_id:
                continue
            if purpose is not None and record.purpose is not Purpose(purpose):
                continue
            if before_id is not None and record.id >= before_id:
                continue
            found.append(record)
            if len(found) == limit:
                break
        return found

    def _matching(self, workload_key: str | None, target: str | None) -> Iterator[TuningRecord]:
        canonical = None if target is None else target_key(target, "target")
        for record in self._records:
            if workload_key is not None and record.workload_key != workload_key:
                continue
            if canonical is not None and record.target != canonical:
                continue
            yield record

    def _host_kind(self, target: str) -> str:
        return self._host_kinds[target]

    def import_jsonl(self, lines: Iterable[str]) -> exchange.ImportSummary:
        stored = {key: w.json for key, w in self._workloads.items()}
        existing = Counter(
            exchange.fingerprint(r.workload_key, r.target, _columns(r)) for r in self._records
        )
        plan = exchange.plan_import(lines, stored, existing, self._checker)
        for w in plan.workloads:
            self._workloads[w["key"]] = WorkloadEntry(
                w["key"], w["name"], w["json"], w["flop_count"]
            )
        for record in plan.records:
            self._host_kinds.setdefault(record.target, record.host_kind)
            self._append(record.row, record.workload_key, record.target)
        return exchange.ImportSummary(len(plan.workloads), len(plan.records), plan.skipped)

    # history -----------------------------------------------------------------------

    def job_trials(
        self, job_id: int, *, after_id: int = 0, limit: int = 1000
    ) -> list[TuningRecord]:
        check_page(limit, None)
        found = [
            r
            for r in self._records
            if r.job_id == job_id and r.purpose is Purpose.SEARCH and r.id > after_id
        ]
        return found[:limit]

    def best_by_job(self, workload_key: str, target: str) -> list[JobBest]:
        best: dict[int, JobBest] = {}
        for r in self._searched(workload_key, target):
            if r.job_id is None or r.min_seconds is None:
                continue
            seen = best.get(r.job_id)
            seconds = r.min_seconds if seen is None else min(seen.seconds, r.min_seconds)
            last_at = r.created_at if seen is None else max(seen.last_at, r.created_at)
            best[r.job_id] = JobBest(r.job_id, seconds, last_at)
        return [best[job_id] for job_id in sorted(best)]

    def search_seconds(
        self, workload_key: str, target: str, trace_hashes: Collection[str]
    ) -> dict[str, float]:
        wanted = set(trace_hashes)
        found: dict[str, float] = {}
        for r in self._searched(workload_key, target):
            if r.trace_hash in wanted and r.min_seconds is not None:
                found[r.trace_hash] = min(found.get(r.trace_hash, r.min_seconds), r.min_seconds)
        return found

    def _searched(self, workload_key: str, target: str) -> Iterator[TuningRecord]:
        """The successful search measurements of the workload on the target."""
        for r in self._matching(workload_key, target):
            if r.ok and r.purpose is Purpose.SEARCH:
                yield r

    def record_counts(self) -> dict[str, int]:
        counted = Counter(status_of(r.error_kind) for r in self._records)
        return {status: counted[status] for status in STATUSES}


def _columns(record: TuningRecord) -> dict[str, Any]:
    return {
        "trace_hash": record.trace_hash,
        "trace_version": record.trace_version,
        "tensortune_version": record.tensortune_version,
        "purpose": record.purpose.value,
        "status": status_of(record.error_kind),
        "run_times": record.run_times,
        "error": record.error,
        "worker_host": record.worker_host,
        "created_at": record.created_at,
    }
