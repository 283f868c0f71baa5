"""Candidates for the workers' tests, local and on Ray: a tiled matmul that a fault
annotation marks for the faulty builder and measurer, a TE workload with no spec, an
illegal trace, and a build result whose library computes the wrong operator."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from faulty_workers import FAULT_ANNOTATION, Fault

from compiler import Schedule, te
from compiler.errors import ErrorKind
from compiler.workload.spec import workload_from_spec
from workers import BuildResult, Candidate, MeasureConfig, RunResult

MATMUL = {"op": "matmul", "args": {"m": 67, "n": 45, "k": 33}}
# Fast test settings: short deadlines, two short repeats.
# Deadlines long enough for a build or run on a machine whose cores another process keeps
# busy: only the hang tests ever reach them.
TEST_CONFIG = MeasureConfig(repeat=2, min_repeat_ms=1.0, timeout_s=30.0)
BUILD_TIMEOUT_S = 30.0
# The loop length of tests that check a timing loop grows past one call of a tiny
# kernel: far above the call even while another test process has the core (at 2 ms, a
# call slowed past it once made the loop a single call).
GROWN_LOOP_MS = 50.0


def matmul_candidate(seed: int = 0, fault: Fault | None = None, argument: str = "") -> Candidate:
    """A tiled matmul; ``seed`` picks the tiling, ``fault`` (with its ``argument``)
    marks it for the faulty builder and measurer."""
    func = workload_from_spec(MATMUL)
    sch = Schedule(func, seed=seed)
    block = sch.get_block("T_matmul")
    i, j, k = sch.get_loops(block)
    i_outer, i_inner = sch.split(i, sch.sample_perfect_tile(i, n=2))
    j_outer, j_inner = sch.split(j, sch.sample_perfect_tile(j, n=2))
    sch.reorder(i_outer, j_outer, k, i_inner, j_inner)
    if seed % 2:
        sch.parallel(i_outer)
    if fault is not None:
        sch.annotate(block, FAULT_ANNOTATION, f"{fault.value}:{argument}")
    return Candidate.make(func, sch.trace, spec=MATMUL)


def slow_candidate() -> Candidate:
    """A 384-cubed matmul on one core whose innermost loop walks down the columns of A
    and C (loops j, k, i): a call takes tens of milliseconds even on a fast machine
    (85 ms on a loaded Zen 4), past the shortest call a runner cuts
    (``workers.measure.WARM_CUT_SECONDS``), so a 1 ms cutoff always cuts it."""
    spec = {"op": "matmul", "args": {"m": 384, "n": 384, "k": 384}}
    func = workload_from_spec(spec)
    sch = Schedule(func)
    i, j, k = sch.get_loops(sch.get_block("T_matmul"))
    sch.reorder(j, k, i)
    return Candidate.make(func, sch.trace, spec=spec)


def custom_candidate() -> Candidate:
    """A workload written in TE, with no spec: checked against its unscheduled build."""
    a = te.placeholder((19, 23), name="A")
    b = te.placeholder((23,), name="B")
    r = te.reduce_axis((0, 23), name="r")
    c = te.compute((19,), lambda i: te.sum(a[i, r] * b[r] + a[i, r], axis=r), name="C")
    func = te.create_prim_func([a, b, c])
    sch = Schedule(func)
    (i, _) = sch.get_loops(sch.get_block("C"))
    sch.split(i, [None, 4])
    return Candidate.make(func, sch.trace)


def spec_candidate(spec: Mapping[str, Any]) -> Candidate:
    """The operator with the default schedule (an empty trace)."""
    func = workload_from_spec(spec)
    return Candidate.make(func, Schedule(func).trace, spec=spec)


def swapped_artifact(builder: Any, shape_b: tuple[int, ...] = (7, 9)) -> BuildResult:
    """An ``add`` candidate of 7x9 arrays carrying the library of ``subtract`` on
    ``shape_b``: on the same shapes it runs fine and computes the wrong thing; on
    others calling it raises (its arguments do not fit)."""
    add = spec_candidate({"op": "add", "args": {"shape_a": [7, 9], "shape_b": [7, 9]}})
    other = {"shape_a": [7, 9], "shape_b": list(shape_b)}
    subtract = spec_candidate({"op": "subtract", "args": other})
    add_build, subtract_build = builder.build([add, subtract])
    assert add_build.ok and subtract_build.ok, (add_build.error, subtract_build.error)
    return dataclasses.replace(add_build, artifact=subtract_build.artifact)


def illegal_candidate() -> Candidate:
    """A trace that names a block the workload does not have."""
    trace = {
        "version": 1,
        "instructions": [
            {"kind": "get_block", "inputs": {"name": "C", "func_name": "main"}, "outputs": ["b0"]}
        ],
    }
    return Candidate(matmul_candidate().workload, json.dumps(trace), spec=json.dumps(MATMUL))


def kinds(results: list[RunResult] | list[BuildResult]) -> list[ErrorKind | None]:
    return [r.error_kind for r in results]
