"""Workers: build throughput and measurement overhead, local and Ray, on GEMM candidates.

    python benchmarks/worker_throughput.py            # both backends
    python benchmarks/worker_throughput.py --json     # last line: one JSON object

The candidates are tilings of a 128 x 128 x 128 fp32 GEMM (sampled tile sizes,
the classic i, j, k, i, j order, the outer loop parallel, the inner one
vectorized), each a different trace. After a warm-up batch (processes started,
the reference computed), two figures per backend:

- build throughput: candidates per second through ``builder.build`` of a batch;
- measurement overhead: the runner's wall time per candidate minus the time of
  the timed calls themselves (number=1, repeat=1, no minimum repeat time): what a
  candidate costs beyond its kernel, i.e. shipping and loading the library,
  the checking call and the comparison with the reference.

Ray runs inside a private network namespace (as the tests do, see
``tests/ray_cluster.py``), on a Ray that the backend starts with 2 CPUs; where no
namespace can be made, the Ray figures are null.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or os.curdir) == _HERE:
    del sys.path[0]  # run as a script, this file would shadow the package it measures

import workers  # noqa: E402
from compiler import Schedule  # noqa: E402
from compiler.workload.spec import workload_from_spec  # noqa: E402
from workers import Candidate, MeasureConfig, Workers  # noqa: E402

SPEC = {"op": "matmul", "args": {"m": 128, "n": 128, "k": 128}}
CONFIG = MeasureConfig(number=1, repeat=1, min_repeat_ms=0.0, warmup=0)
WARMUP = 4
TESTS_DIR = os.path.join(os.path.dirname(_HERE), "tests")


def gemm_candidates(count: int, first_seed: int = 0) -> list[Candidate]:
    func = workload_from_spec(SPEC)
    candidates = []
    for seed in range(first_seed, first_seed + count):
        sch = Schedule(func, seed=seed)
        block = sch.get_block("T_matmul")
        i, j, k = sch.get_loops(block)
        i_outer, i_inner = sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=8))
        j_outer, j_inner = sch.split(j, sch.sample_perfect_tile(j, n=2, max_innermost_factor=32))
        sch.reorder(i_outer, j_outer, k, i_inner, j_inner)
        sch.parallel(i_outer)
        sch.vectorize(j_inner)
        candidates.append(Candidate.make(func, sch.trace, spec=SPEC))
    return candidates


def measure_backend(backend: Workers, count: int) -> dict[str, float]:
    """Build throughput and per-candidate overhead of ``backend``, after a warm-up."""
    backend.measure(gemm_candidates(WARMUP, first_seed=10_000))
    candidates = gemm_candidates(count)
    start = time.perf_counter()
    builds = backend.builder.build(candidates)
    build_seconds = time.perf_counter() - start
    failed = [b.error for b in builds if not b.ok]
    if failed:
        raise RuntimeError(f"{len(failed)} GEMM candidates failed to build: {failed[0]}")
    start = time.perf_counter()
    results = backend.runner.run(builds)
    run_seconds = time.perf_counter() - start
    failed = [r.error for r in results if not r.ok]
    if failed:
        raise RuntimeError(f"{len(failed)} GEMM candidates failed to run: {failed[0]}")
    kernel_seconds = sum(sum(r.run_times) * r.number for r in results)
    return {
        "builds_per_s": count / build_seconds,
        "overhead_s": (run_seconds - kernel_seconds) / count,
        "kernel_s": kernel_seconds / count,
    }


def ray_in_namespace(count: int) -> dict[str, float] | None:
    """The Ray figures, measured by this script run again inside a namespace."""
    sys.path.insert(0, TESTS_DIR)
    from ray_cluster import NAMESPACE, RAY_ENV, isolation_unavailable

    reason = isolation_unavailable()
    if reason is not None:
        print(f"ray: skipped ({reason})", file=sys.stderr)
        return None
    command = [*NAMESPACE, sys.executable, os.path.abspath(__file__), "--ray-inside"]
    command += ["--count", str(count)]
    done = subprocess.run(
        command, capture_output=True, text=True, env={**os.environ, **RAY_ENV}, check=False
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the Ray benchmark failed:\n{done.stderr[-4000:]}")
    return json.loads(lines[-1])


def ray_inside(count: int) -> None:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    with workers.create("ray", num_cpus=2, config=CONFIG) as backend:
        print(json.dumps(measure_backend(backend, count)), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    parser.add_argument("--count", type=int, default=24, help="candidates per batch")
    parser.add_argument("--ray-inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ray_inside:
        ray_inside(args.count)
        return
    start = time.perf_counter()
    with workers.create("local", config=CONFIG) as backend:
        started = time.perf_counter() - start
        local = measure_backend(backend, args.count)
    ray = ray_in_namespace(args.count)
    report(local, ray, started, args.count)
    if args.json:
        print(json.dumps(summary(local, ray, started)))


def report(
    local: dict[str, float], ray: dict[str, float] | None, started: float, count: int
) -> None:
    print(f"GEMM {SPEC['args']['m']}^3 fp32 candidates, batches of {count}")
    print(f"local backend start: {started * 1e3:.0f} ms")
    for name, figures in (("local", local), ("ray", ray)):
        if figures is None:
            print(f"{name:>5}: skipped")
            continue
        print(
            f"{name:>5}: {figures['builds_per_s']:6.1f} builds/s   overhead "
            f"{figures['overhead_s'] * 1e3:6.1f} ms/candidate   (kernel "
            f"{figures['kernel_s'] * 1e3:.2f} ms)"
        )


def summary(
    local: dict[str, float], ray: dict[str, float] | None, started: float
) -> dict[str, Any]:
    return {
        "local_start_s": round(started, 4),
        "local_builds_per_s": round(local["builds_per_s"], 2),
        "ray_builds_per_s": None if ray is None else round(ray["builds_per_s"], 2),
        "local_overhead_s": round(local["overhead_s"], 5),
        "ray_overhead_s": None if ray is None else round(ray["overhead_s"], 5),
    }


if __name__ == "__main__":
    main()
