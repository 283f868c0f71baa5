"""``compiler.build(mod, target, database=db)``: the stored best schedule is what ships.

Nothing is tuned here: a GEMM schedule written by hand (tiled, unrolled, vectorized,
parallel) is stored as a record, next to a slower record of the empty schedule, and
the build must pick it, replay it and say so: the IR it compiles is the hand
schedule's, its machine code is the hand schedule's build (not the default
schedule's), its output is numpy's, and it beats the loops as written.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from db_helpers import RELU

import compiler
from compiler import te
from compiler.ir.function import IRModule, PrimFunc
from compiler.ir.structural import structural_equal
from compiler.schedule import Schedule
from compiler.schedule.trace import Trace
from compiler.target.errors import TargetError
from compiler.target.llvm import LLVMTarget
from compiler.target.parse import canonical_target
from compiler.tuned.lookup import apply_best
from compiler.workload.key import workload_key
from compiler.workload.spec import workload_from_spec
from db import Measurement, MemoryDatabase

M, N, K = 67, 48, 75
# One thread, so that timings do not hang on a core that another process holds.
TARGET = "llvm -num-cores=1"


def gemm() -> PrimFunc:
    a = te.placeholder((M, K), name="A")
    b = te.placeholder((K, N), name="B")
    r = te.reduce_axis((0, K), name="k")
    c = te.compute((M, N), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return te.create_prim_func([a, b, c])


def hand_schedule(func: PrimFunc) -> Schedule:
    """Rows in parallel blocks of 4, each block's 4 x 16 tile kept in registers:
    the 4 rows unrolled, the 16 columns one vector."""
    sch = Schedule(func)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i_outer, i_inner = sch.split(i, [None, 4])
    j_outer, j_inner = sch.split(j, [None, 16])
    sch.reorder(i_outer, j_outer, k, i_inner, j_inner)
    sch.unroll(i_inner)
    sch.vectorize(j_inner)
    sch.parallel(i_outer)
    return sch


def test_the_build_applies_the_stored_hand_written_gemm_schedule(database, caplog, rng):
    func = gemm()
    key = database.commit_workload(func, name=f"gemm {M}x{N}x{K}", flop_count=2 * M * N * K).key
    sch = hand_schedule(func)
    database.commit_records(
        [
            Measurement.ok(key, TARGET, Trace(), [9e-4], worker_host="by hand"),
            Measurement.ok(key, TARGET, sch.trace, [1e-4], worker_host="by hand"),
        ]
    )

    tuned, report = apply_best(IRModule({"main": func}), TARGET, database)
    script = tuned["main"].script()
    print(script)
    assert report.tuned == ["main"] and report.untuned == []
    assert structural_equal(tuned["main"], sch.mod["main"])
    assert "T.parallel(17)" in script and "T.vectorized(16)" in script
    assert "T.unroll(4)" in script

    with caplog.at_level(logging.INFO, logger="compiler.build"):
        lib = compiler.build(func, target=TARGET, database=database)
    assert "main: tuned (replayed the best stored schedule" in caplog.text
    default = compiler.build(func, target=TARGET)
    plain = compiler.build(func, target=TARGET, default_schedule=False)
    hand = compiler.build(sch.mod, target=TARGET)
    assert lib.get_source() == hand.get_source()
    assert lib.get_source() != default.get_source() != plain.get_source()
    assert "GOMP_parallel" in lib.get_source() and "GOMP_parallel" not in plain.get_source()

    a = rng.standard_normal((M, K), dtype=np.float32)
    b = rng.standard_normal((K, N), dtype=np.float32)
    c = np.zeros((M, N), dtype=np.float32)
    lib(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    tuned_s = lib.time_evaluator("main", number=20, repeat=5)(a, b, c).min
    plain_s = plain.time_evaluator("main", number=20, repeat=5)(a, b, c).min
    default_s = default.time_evaluator("main", number=20, repeat=5)(a, b, c).min
    print(
        f"stored schedule {tuned_s * 1e6:.1f} us, default schedule {default_s * 1e6:.1f} us, "
        f"loops as written {plain_s * 1e6:.1f} us"
    )


def test_the_report_names_the_functions_that_were_not_tuned(database, caplog, rng):
    func = gemm()
    relu = workload_from_spec(RELU)
    key = database.commit_workload(func).key
    database.commit_records([Measurement.ok(key, "llvm", hand_schedule(func).trace, [1e-4])])
    mod = IRModule({"gemm": func, "relu": relu})
    with caplog.at_level(logging.INFO, logger="compiler.build"):
        lib = compiler.build(mod, target="llvm", database=database)
    assert "gemm: tuned" in caplog.text
    assert "relu: not tuned (no stored schedule for this target" in caplog.text
    x = rng.standard_normal((7, 5), dtype=np.float32)
    y = np.zeros_like(x)
    lib["relu"](x, y)
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    _, report = apply_best(mod, "llvm -mcpu=skylake", database)
    assert report.untuned == ["gemm", "relu"]


class TraceTable:
    """The lookup interface without a database: best traces by (key, target)."""

    def __init__(self, traces: dict[tuple[str, str], str]) -> None:
        self.traces = traces

    def targets(self, workload_key: str) -> list[str]:
        return [target for key, target in self.traces if key == workload_key]

    def best_trace(self, workload_key: str, target: str) -> str | None:
        return self.traces.get((workload_key, target))

    def best_seconds(self, workload_key: str, target: str) -> float | None:
        return 1.0 if (workload_key, target) in self.traces else None


def test_a_stored_schedule_that_no_longer_replays_is_reported_and_skipped(rng):
    func = gemm()
    wrong = Schedule(workload_from_spec(RELU))
    wrong.split(wrong.get_loops(wrong.get_block("T_relu"))[0], [None, 2])
    target = canonical_target("llvm")
    lookup = TraceTable({(workload_key(func), target): wrong.trace.to_json_string()})
    tuned, report = apply_best(IRModule({"main": func}), "llvm", lookup)
    assert report.untuned == ["main"]
    assert "does not replay" in report.functions[0].reason
    assert tuned["main"] is func


AVX512 = "llvm -mcpu=znver4 -mattr=+avx2,+avx512f,+fma -num-cores=2"
AVX2 = "llvm -mcpu=znver4 -mattr=+fma,+avx2 -num-cores=2"


def test_a_schedule_tuned_with_avx512_is_never_applied_on_an_avx2_target():
    database = MemoryDatabase()
    func = gemm()
    key = database.commit_workload(func).key
    database.commit_records([Measurement.ok(key, AVX512, hand_schedule(func).trace, [1e-4])])
    assert database.targets(key) == [AVX512]
    tuned, report = apply_best(IRModule({"main": func}), AVX2, database)
    assert report.untuned == ["main"] and tuned["main"] is func
    assert report.functions[0].reason == (
        f"not applied: tuned for features this target lacks: {AVX512} needs +avx512f"
    )
    _, on_avx512 = apply_best(
        IRModule({"main": func}), AVX512.replace("+fma", "+fma,+bmi"), database
    )
    assert on_avx512.tuned == ["main"]
    assert on_avx512.functions[0].reason == f"replayed the best stored schedule of {AVX512}"


def test_a_target_string_that_differs_only_in_spelling_still_matches():
    func = gemm()
    host = LLVMTarget.parse("llvm -num-cores=1")
    features = ",".join(host.codegen_features)
    assert str(host) == f"llvm -mcpu={host.cpu} -mattr={features} -num-cores=1"
    assert LLVMTarget.parse(str(host)).codegen_features == host.codegen_features
    assert canonical_target(AVX2) == "llvm -mcpu=znver4 -mattr=+avx2,+fma -num-cores=2"
    # a record stored by an older tensortune, under the host's CPU name only
    older = f"llvm -mcpu={host.cpu} -num-cores=1"
    lookup = TraceTable({(workload_key(func), older): hand_schedule(func).trace.to_json_string()})
    _, report = apply_best(IRModule({"main": func}), "llvm -num-cores=1", lookup)
    assert report.tuned == ["main"]
    _, report = apply_best(IRModule({"main": func}), "llvm -num-cores=2", lookup)
    assert report.functions[0].reason == "no stored schedule for this target"


def test_a_target_says_what_it_can_do():
    caps = LLVMTarget.parse(AVX512).capabilities
    assert (caps.cores, caps.vector_bits, caps.float_lanes) == (2, 512, 16)
    assert LLVMTarget.parse(AVX2).capabilities.float_lanes == 8
    assert 0 < caps.l1d_bytes < caps.l2_bytes < caps.l3_bytes
    assert LLVMTarget.parse("llvm -mcpu=znver4 -mattr=").codegen_features == ()
    with pytest.raises(TargetError, match="feature 'avx2' must be \\+name or -name"):
        LLVMTarget.parse("llvm -mattr=avx2")
