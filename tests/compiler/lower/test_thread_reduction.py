"""Reductions shared by the threads of a GPU block: a reduction loop bound to
threadIdx.x becomes per-thread partial results combined by warp shuffles (and a
shared array between warps). Checked in the GPU simulator against numpy, and in
the PTX that links for the device."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_simulator import simulate

from compiler import te
from compiler.cuda_build import build_cuda_binary
from compiler.lower.gpu_kernels import lower_gpu
from compiler.schedule import Schedule, ScheduleError
from compiler.schedule.default_gpu import gpu_default_schedule
from compiler.target.cuda import CudaTarget

CUDA = "cuda -arch=sm_80"
CAPABILITIES = CudaTarget.parse(CUDA).capabilities
REDUCERS = {"sum": (te.sum, np.sum), "max": (te.max, np.max), "min": (te.min, np.min)}


def _row_reduction(rows: int, columns: int, op: str) -> tuple[Schedule, te.Tensor]:
    a = te.placeholder((rows, columns), name="A")
    k = te.reduce_axis((0, columns), name="k")
    b = te.compute((rows,), lambda i: REDUCERS[op][0](a[i, k], axis=k), name="B")
    return Schedule(te.create_prim_func([a, b])), b


def _shared_by(sch: Schedule, lanes: int) -> Schedule:
    """Rows on blocks, each row's reduction shared by ``lanes`` threads."""
    row, column = sch.get_loops(sch.get_block("B"))
    rest, lane = sch.split(column, [None, lanes])
    sch.reorder(lane, rest)
    sch.bind(row, "blockIdx.x")
    sch.bind(lane, "threadIdx.x")
    return sch


@pytest.mark.parametrize("lanes", [4, 32, 128])
@pytest.mark.parametrize("op", sorted(REDUCERS))
def test_a_reduction_shared_by_threads_matches_numpy(lanes: int, op: str) -> None:
    sch, _ = _row_reduction(5, 256, op)
    program = lower_gpu(_shared_by(sch, lanes).mod["main"], "main", CAPABILITIES)
    (kernel,) = program.kernels
    assert (kernel.grid, kernel.block) == ((5, 1, 1), (lanes, 1, 1))
    values = np.random.default_rng(lanes).standard_normal((5, 256)).astype("float32")
    got = np.full(5, np.nan, dtype="float32")
    simulate(program, [values, got])
    np.testing.assert_allclose(got, REDUCERS[op][1](values, axis=1), rtol=1e-5, atol=1e-5)


def test_a_warp_reduction_is_shuffles_and_more_warps_meet_in_shared_memory() -> None:
    warp = build_cuda_binary(_shared_by(_row_reduction(5, 256, "sum")[0], 32).mod, CUDA)
    assert warp.ptx.count("shfl.sync.bfly") == 5  # 16, 8, 4, 2, 1 lanes apart
    assert "bar.sync" not in warp.ptx and "barrier" not in warp.ptx
    four = build_cuda_binary(_shared_by(_row_reduction(5, 256, "max")[0], 128).mod, CUDA)
    assert four.ptx.count("shfl.sync.bfly") == 5 + 2  # then the 4 warps' results
    assert four.ptx.count("bar.sync") == 2
    assert ".shared" in four.ptx


def test_two_thread_groups_in_one_block_reduce_apart() -> None:
    """Rows on threadIdx.y: each warp holds four rows of 8 threads, which must not
    mix their sums."""
    sch, _ = _row_reduction(8, 64, "sum")
    row, column = sch.get_loops(sch.get_block("B"))
    outer, inner = sch.split(row, [None, 4])
    rest, lane = sch.split(column, [None, 8])
    sch.reorder(lane, rest)
    sch.bind(outer, "blockIdx.x")
    sch.bind(inner, "threadIdx.y")
    sch.bind(lane, "threadIdx.x")
    program = lower_gpu(sch.mod["main"], "main", CAPABILITIES)
    assert program.kernels[0].block == (8, 4, 1)
    values = np.random.default_rng(3).standard_normal((8, 64)).astype("float32")
    got = np.full(8, np.nan, dtype="float32")
    simulate(program, [values, got])
    np.testing.assert_allclose(got, values.sum(axis=1), rtol=1e-5, atol=1e-5)
    assert build_cuda_binary(sch.mod, CUDA).ptx.count("shfl.sync.bfly") == 3


def test_binding_part_of_a_reduction_that_other_loops_also_run_is_refused() -> None:
    sch, _ = _row_reduction(4, 256, "sum")
    _, column = sch.get_loops(sch.get_block("B"))
    _, lane = sch.split(column, [None, 32])  # the lane loop inside the rest
    with pytest.raises(ScheduleError, match="reduces over loops outside it"):
        sch.bind(lane, "threadIdx.x")
    with pytest.raises(ScheduleError, match="reduce variable"):
        sch.bind(lane, "threadIdx.y")  # only threadIdx.x threads share a reduction


def test_a_shared_reduction_needs_every_thread_of_the_block() -> None:
    """A consumer of 64 threads and a reduction of 32 in one kernel: half the threads
    would skip the shuffles the others wait in."""
    a = te.placeholder((4, 64), name="A")
    k = te.reduce_axis((0, 64), name="k")
    total = te.compute((4,), lambda i: te.sum(a[i, k], axis=k), name="B")
    scaled = te.compute((4, 64), lambda i, j: a[i, j] / total[i], name="C")
    sch = Schedule(te.create_prim_func([a, scaled]))
    row, column = sch.get_loops(sch.get_block("C"))
    sch.bind(row, "blockIdx.x")
    sch.bind(column, "threadIdx.x")
    sch.compute_at(sch.get_block("B"), row)
    _, reduction = sch.get_loops(sch.get_block("B"))
    rest, lane = sch.split(reduction, [None, 32])
    sch.reorder(lane, rest)
    sch.bind(lane, "threadIdx.x")
    with pytest.raises(ScheduleError, match="not every thread of the block reaches it"):
        lower_gpu(sch.mod["main"], "main", CAPABILITIES)


def test_a_shared_reduction_needs_a_power_of_two_of_threads() -> None:
    sch, _ = _row_reduction(4, 96, "sum")
    with pytest.raises(ScheduleError, match="a power of two"):
        lower_gpu(_shared_by(sch, 48).mod["main"], "main", CAPABILITIES)


def test_the_default_gpu_schedule_gives_each_output_of_a_long_reduction_a_warp() -> None:
    """Six rows of 512: one thread per row would leave a GPU all but idle."""
    sch, _ = _row_reduction(6, 512, "max")
    program = lower_gpu(gpu_default_schedule(sch.mod["main"], CUDA).mod["main"], "m", CAPABILITIES)
    (kernel,) = program.kernels
    assert (kernel.grid, kernel.block) == ((6, 1, 1), (32, 1, 1))
    values = np.random.default_rng(1).standard_normal((6, 512)).astype("float32")
    got = np.full(6, np.nan, dtype="float32")
    simulate(program, [values, got])
    np.testing.assert_allclose(got, values.max(axis=1))
    many, _ = _row_reduction(20000, 128, "sum")  # enough outputs for a thread each
    (kernel,) = lower_gpu(
        gpu_default_schedule(many.mod["main"], CUDA).mod["main"], "m", CAPABILITIES
    ).kernels
    assert kernel.block == (256, 1, 1)
