"""How fast the tuning database answers `best` once it holds 100,000 records.

    python benchmarks/db_best.py                    # a temporary SQLite file
    python benchmarks/db_best.py --url postgresql+psycopg://postgres@127.0.0.1:5432/bench

The records are spread over 20 matmul workloads on 2 targets (2,500 per pair, one
in 20 a failure), committed in batches as workers would; then `best` is timed on
random (workload, target) pairs. The goal is under 10 ms per call. The database
at --url should be empty: the benchmark adds its records to it.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from compiler.errors import ErrorKind
from compiler.schedule import Schedule
from compiler.workload.spec import workload_from_spec
from db import Database, Measurement, SQLDatabase

WORKLOADS = 20
TARGETS = ("llvm -mcpu=znver3 -num-cores=2", "llvm -mcpu=skylake -num-cores=2")
FACTORS = tuple(range(2, 22))
BATCH = 5000


def spec(index: int) -> dict:
    return {"op": "matmul", "args": {"m": 64 + index, "n": 48, "k": 32}}


def traces(index: int) -> list[str]:
    """Hand-made schedules of the workload: the rows split by each of FACTORS."""
    out = []
    for factor in FACTORS:
        sch = Schedule(workload_from_spec(spec(index)))
        sch.split(sch.get_loops(sch.get_block("T_matmul"))[0], [None, factor])
        out.append(sch.trace.to_json_string())
    return out


def fill(db: Database, total: int, rng: random.Random) -> list[str]:
    keys = [db.commit_workload(spec(i)).key for i in range(WORKLOADS)]
    per_pair = total // (WORKLOADS * len(TARGETS))
    batch: list[Measurement] = []
    for index, key in enumerate(keys):
        schedules = traces(index)
        for target in TARGETS:
            for n in range(per_pair):
                trace = schedules[n % len(schedules)]
                if n % 20 == 19:
                    batch.append(
                        Measurement.failed(key, target, trace, ErrorKind.RUN_ERROR, "crash")
                    )
                else:
                    batch.append(Measurement.ok(key, target, trace, [rng.uniform(1e-4, 1e-2)]))
                if len(batch) == BATCH:
                    db.commit_records(batch)
                    batch = []
    db.commit_records(batch)
    return keys


def time_best(db: Database, keys: list[str], k: int, calls: int, rng: random.Random) -> list[float]:
    seconds = []
    for _ in range(calls):
        key, target = rng.choice(keys), rng.choice(TARGETS)
        start = time.perf_counter()
        found = db.best(key, target, k)
        seconds.append(time.perf_counter() - start)
        assert len(found) == k
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="an empty database (default: a temporary SQLite file)")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        url = args.url or f"sqlite:///{Path(tmp) / 'bench.db'}"
        with SQLDatabase(url) as db:
            start = time.perf_counter()
            keys = fill(db, args.records, rng)
            fill_s = time.perf_counter() - start
            print(f"{db.dialect}: committed {db.count():,} records in {fill_s:.1f} s")
            for k in (1, 10):
                seconds = time_best(db, keys, k, args.calls, rng)
                median = statistics.median(seconds) * 1e3
                p99 = statistics.quantiles(seconds, n=100)[98] * 1e3
                verdict = "ok" if median < 10 else "SLOWER THAN 10 ms"
                print(f"  best(k={k:<2}) median {median:.2f} ms, p99 {p99:.2f} ms  [{verdict}]")


if __name__ == "__main__":
    main()
