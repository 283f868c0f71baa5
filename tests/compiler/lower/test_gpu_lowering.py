"""GPU lowering without a GPU: thread bindings, shared and local buffers, barriers,
launch shapes, the target's limits, and the PTX that comes out.

The simulator (tests/support/gpu_simulator.py) runs lowered kernels thread by
thread between barriers and refuses races, so each check compares what the GPU
would compute with numpy; nvJitLink assembles every PTX for sm_80 and sm_90.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from gpu_simulator import RaceError, simulate
from hypothesis import given, settings
from hypothesis import strategies as st
from op_examples import EXAMPLES
from workloads import matmul

from compiler import build_cuda, te
from compiler.cuda_build import build_cuda_binary
from compiler.ir.function import IRModule, PrimFunc
from compiler.lower import gpu_kernels
from compiler.lower.gpu_kernels import lower_gpu
from compiler.schedule import Schedule, ScheduleError
from compiler.schedule.default_gpu import apply_gpu_default_schedule
from compiler.target.cuda import CudaTarget
from compiler.workload.spec import workload_from_spec

ARCHES = ("sm_80", "sm_90")
CAPS = CudaTarget("sm_80").capabilities


def tiled_matmul(
    m: int, n: int, k: int, block: tuple[int, int, int], thread: tuple[int, int]
) -> Schedule:
    """The classic shared-memory GEMM: a block tile of ``block`` (rows, columns,
    reduction step), ``thread`` elements per thread, A and B fetched into shared
    memory by all threads of the block, C accumulated in registers."""
    bm, bn, bk = block
    tm, tn = thread
    sch = Schedule(matmul(m, n, k))
    c = sch.get_block("C")
    local = sch.cache_write(c, 0, "local")
    i, j, kk = sch.get_loops(c)
    bi, ti, ii = sch.split(i, [None, bm // tm, tm])
    bj, tj, jj = sch.split(j, [None, bn // tn, tn])
    ko, ki = sch.split(kk, [None, bk])
    sch.reorder(bi, bj, ti, tj, ko, ki, ii, jj)
    sch.bind(bi, "blockIdx.y")
    sch.bind(bj, "blockIdx.x")
    sch.bind(ti, "threadIdx.y")
    sch.bind(tj, "threadIdx.x")
    sch.reverse_compute_at(local, tj)
    for index in (0, 1):
        shared = sch.cache_read(c, index, "shared")
        sch.compute_at(shared, ko)
        fused = sch.fuse(*sch.get_loops(shared)[-2:])
        _, ty, tx = sch.split(fused, [None, bm // tm, bn // tn])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
    return sch


def random_inputs(func: PrimFunc, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = []
    for param in func.params:
        shape = tuple(int(d.value) for d in param.shape)  # type: ignore[attr-defined]
        arrays.append(rng.uniform(0.5, 1.5, size=shape).astype(param.dtype))
    return arrays


def simulated(func: PrimFunc, arrays: list[np.ndarray]) -> list[np.ndarray]:
    copies = [a.copy() for a in arrays]
    simulate(lower_gpu(func, "main", CAPS), copies)
    return copies


def test_tiled_matmul_has_one_kernel_with_shared_tiles_and_two_barriers() -> None:
    program = lower_gpu(tiled_matmul(64, 64, 32, (32, 32, 8), (4, 4)).mod["main"], "main", CAPS)
    (kernel,) = program.kernels
    assert kernel.grid == (2, 2, 1)
    assert kernel.block == (8, 8, 1)
    assert kernel.shared_bytes == 2 * 32 * 8 * 4
    assert [b.name for b in kernel.buffers] == ["A", "B", "C"]
    from compiler.ir.printer import stmt_to_str

    text = stmt_to_str(kernel.body)
    assert text.count("tvm_storage_sync") == 2
    assert 'scope="local"' in text and text.count('scope="shared"') == 2


@pytest.mark.parametrize(
    ("shape", "block", "thread"),
    [((32, 32, 16), (16, 16, 4), (2, 2)), ((24, 40, 12), (8, 8, 4), (2, 4))],
)
def test_tiled_matmul_computes_the_product(shape, block, thread) -> None:
    sch = tiled_matmul(*shape, block, thread)
    arrays = random_inputs(sch.mod["main"])
    a, b, c = simulated(sch.mod["main"], arrays)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


@settings(max_examples=15, deadline=None)
@given(
    m=st.integers(1, 20),
    n=st.integers(1, 20),
    k=st.integers(1, 12),
    bm=st.sampled_from([2, 4, 8]),
    bn=st.sampled_from([2, 4, 8]),
    bk=st.sampled_from([1, 2, 4]),
    tm=st.sampled_from([1, 2]),
    tn=st.sampled_from([1, 2]),
)
def test_tiled_matmul_any_tiles_is_right_or_refused(m, n, k, bm, bn, bk, tm, tn) -> None:
    """Tiles that do not divide the shapes leave guards on threads and fetches; every
    schedule the primitives and GPU lowering accept must still compute the product."""
    try:
        sch = tiled_matmul(m, n, k, (bm, bn, bk), (tm, tn))
        program = lower_gpu(sch.mod["main"], "main", CAPS)
    except ScheduleError:
        return
    arrays = random_inputs(sch.mod["main"], seed=m * 400 + n * 20 + k)
    simulate(program, arrays)
    a, b, c = arrays
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_simulator_catches_a_missing_barrier(monkeypatch: pytest.MonkeyPatch) -> None:
    """The oracle itself: without barriers the shared tiles race."""
    monkeypatch.setattr(gpu_kernels, "insert_barriers", lambda body, dims: body)
    sch = tiled_matmul(32, 32, 16, (16, 16, 4), (2, 2))
    with pytest.raises(RaceError):
        simulated(sch.mod["main"], random_inputs(sch.mod["main"]))


@pytest.mark.parametrize("op", sorted(EXAMPLES))
def test_default_gpu_schedule_of_every_operator(op: str) -> None:
    """Every operator of the library builds for sm_80 and sm_90 with the default GPU
    schedule, and the simulated kernels agree with the CPU build."""
    func = workload_from_spec({"op": op, "args": EXAMPLES[op]})
    mod = apply_gpu_default_schedule(IRModule({"main": func}), "cuda -arch=sm_80")
    for arch in ARCHES:
        binary = build_cuda_binary(mod, f"cuda -arch={arch}")
        assert binary.cubin and f".target {arch}" in binary.ptx
    arrays = random_inputs(func)
    expected = [a.copy() for a in arrays]
    from compiler import build

    build(func, target="llvm")(*expected)
    got = simulated(mod["main"], arrays)
    for want, have in zip(expected, got, strict=True):
        np.testing.assert_allclose(have, want, rtol=1e-4, atol=1e-5)


def test_ptx_of_a_shared_memory_kernel_reads_indices_and_synchronizes() -> None:
    """What a reviewer expects in the PTX: the block and thread indices, the tiles
    declared in shared memory and accessed with shared loads and stores, barriers, and
    fused multiply-adds on registers."""
    binary = build_cuda(
        tiled_matmul(256, 256, 64, (64, 64, 8), (4, 4)).mod, target="cuda -arch=sm_90"
    )
    ptx = binary.ptx
    assert ".target sm_90" in ptx
    assert re.search(r"\.visible \.entry tensortune_main\(", ptx)
    for register in ("%ctaid.x", "%ctaid.y", "%tid.x", "%tid.y"):
        assert register in ptx
    assert len(re.findall(r"\.shared \.align 16 \.b8 \w+\[2048\]", ptx)) == 2
    assert "st.shared" in ptx and "ld.shared" in ptx
    assert ptx.count("bar.sync") == 2
    assert "fma.rn.f32" in ptx
    (launch,) = binary.function("main").kernels
    assert (launch.grid, launch.block, launch.shared_bytes) == ((4, 4, 1), (16, 16, 1), 4096)


def test_threads_beyond_the_block_limit_are_refused() -> None:
    sch = Schedule(matmul(64, 64, 8))
    i, j, _ = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "threadIdx.y")
    sch.bind(j, "threadIdx.x")
    with pytest.raises(ScheduleError, match=r"4096 threads per block.*1024"):
        build_cuda_binary(sch.mod, "cuda -arch=sm_80")


def test_shared_memory_beyond_the_limit_is_refused() -> None:
    sch = tiled_matmul(512, 512, 512, (128, 128, 64), (8, 8))
    with pytest.raises(ScheduleError, match=r"bytes of shared memory.*49152"):
        build_cuda_binary(sch.mod, "cuda -arch=sm_80")


def test_block_index_inside_a_thread_loop_is_refused() -> None:
    sch = Schedule(matmul(32, 32, 8))
    i, j, _ = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "threadIdx.x")
    sch.bind(j, "blockIdx.x")
    with pytest.raises(ScheduleError, match="blocks are outside threads"):
        build_cuda_binary(sch.mod, "cuda -arch=sm_80")


def test_block_indexed_by_two_loops_of_one_thread_axis_is_refused() -> None:
    sch = Schedule(matmul(32, 32, 8))
    i, j, _ = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "threadIdx.x")
    sch.bind(j, "threadIdx.x")
    with pytest.raises(ScheduleError, match=r"both bound to threadIdx.x"):
        build_cuda_binary(sch.mod, "cuda -arch=sm_80")


def test_local_buffer_shared_by_threads_is_refused() -> None:
    """A local accumulator the threads fill and one loop then writes back would be
    read where each thread sees only its own copy."""
    sch = Schedule(matmul(32, 32, 8))
    c = sch.get_block("C")
    local = sch.cache_write(c, 0, "local")
    i, _, _ = sch.get_loops(c)
    io, ii = sch.split(i, [None, 4])
    sch.bind(io, "blockIdx.x")
    sch.bind(ii, "threadIdx.x")
    sch.reverse_compute_at(local, io)
    with pytest.raises(ScheduleError, match=r"local buffer 'C_local'.*own copy"):
        build_cuda_binary(sch.mod, "cuda -arch=sm_80")


def test_global_intermediate_inside_a_kernel_becomes_shared_when_threads_share_it() -> None:
    """The same nest with a global-scope cache: the threads' partial tile is handed
    through shared memory, with a barrier before the write-back reads it."""
    sch = Schedule(matmul(32, 32, 8))
    c = sch.get_block("C")
    cache = sch.cache_write(c, 0, "global")
    i, _, _ = sch.get_loops(c)
    io, ii = sch.split(i, [None, 4])
    sch.bind(io, "blockIdx.x")
    sch.bind(ii, "threadIdx.x")
    sch.reverse_compute_at(cache, io)
    arrays = random_inputs(sch.mod["main"])
    a, b, c_out = simulated(sch.mod["main"], arrays)
    np.testing.assert_allclose(c_out, a @ b, rtol=1e-5)
    (kernel,) = lower_gpu(sch.mod["main"], "main", CAPS).kernels
    assert kernel.shared_bytes == 4 * 32 * 4


def test_bind_refuses_a_reduction_loop_off_threadIdx_x_and_unknown_axes() -> None:
    """Only threadIdx.x threads share a reduction (``test_thread_reduction``)."""
    sch = Schedule(matmul(16, 16, 8))
    _, _, k = sch.get_loops(sch.get_block("C"))
    with pytest.raises(ScheduleError, match="reduce variable"):
        sch.bind(k, "threadIdx.y")
    i = sch.get_loops(sch.get_block("C"))[0]
    with pytest.raises(ScheduleError, match="not a thread axis"):
        sch.bind(i, "threadIdx.w")
    sch.bind(i, "blockIdx.x")
    with pytest.raises(ScheduleError, match="only serial loops bind"):
        sch.bind(i, "threadIdx.x")


def test_bind_is_recorded_and_replays_from_json() -> None:
    from compiler.schedule.trace import Trace

    sch = tiled_matmul(64, 64, 32, (32, 32, 8), (4, 4))
    assert "bind" in [inst.kind for inst in sch.trace.instructions]
    replayed = Schedule(matmul(64, 64, 32))
    Trace.from_json(sch.trace.to_json_string()).apply_to_schedule(replayed)
    assert replayed.mod["main"].script() == sch.mod["main"].script()


def test_cuda_targets_parse_and_refuse_clearly() -> None:
    from compiler.target.errors import TargetError
    from compiler.target.parse import parse_target

    assert str(parse_target("cuda -arch=sm_90")) == "cuda -arch=sm_90"
    assert CudaTarget.parse("cuda -arch=sm_86").ptx_version == 71
    for bad, message in (
        ("cuda", "no single GPU architecture"),
        ("cuda -arch=sm_61", "before sm_70"),
        ("cuda -arch=ampere", "not an architecture"),
        ("cuda -arch=sm_80 -fast", "cannot read option"),
        ("opencl", "allowed forms"),
    ):
        with pytest.raises(TargetError, match=message):
            parse_target(bad)


def test_storage_align_pads_shared_rows_and_keeps_the_result() -> None:
    """Rows of 8 floats padded to 9: a warp reading a column of the tile no longer
    hits one bank; the product is unchanged."""
    sch = tiled_matmul(32, 32, 16, (16, 16, 8), (2, 2))
    shared = sch.get_block("A_shared")
    sch.storage_align(shared, 0, 0, 8, 1)
    program = lower_gpu(sch.mod["main"], "main", CAPS)
    (kernel,) = program.kernels
    assert kernel.shared_bytes == (16 * 9 + 8 * 16) * 4
    arrays = random_inputs(sch.mod["main"])
    a, b, c = simulated(sch.mod["main"], arrays)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    binary = build_cuda_binary(sch.mod, "cuda -arch=sm_80")
    assert ".b8 tensortune_main_A_shared[576]" in binary.ptx


def test_storage_align_refuses_parameters_and_bad_arguments() -> None:
    sch = tiled_matmul(32, 32, 16, (16, 16, 8), (2, 2))
    shared = sch.get_block("A_shared")
    with pytest.raises(ScheduleError, match="offset must be"):
        sch.storage_align(shared, 0, 0, 32, 32)
    with pytest.raises(ScheduleError, match="no axis 2"):
        sch.storage_align(shared, 0, 2, 32, 1)
    with pytest.raises(ScheduleError, match="function parameter"):
        sch.storage_align(sch.get_block("C_local"), 0, 0, 32, 1)


def test_intermediates_nested_in_one_kernel_all_move_to_shared_memory() -> None:
    """Two intermediates computed at the block loop, one inside the other's
    allocation: both become shared, with barriers, and the result holds."""
    a = te.placeholder((2, 32), name="A")
    b = te.compute((2, 32), lambda i, j: a[i, 31 - j] + 1.0, name="B")
    c = te.compute((2, 32), lambda i, j: b[i, 31 - j] * 2.0, name="C")
    d = te.compute((2, 32), lambda i, j: c[i, 31 - j] - 3.0, name="D")
    sch = Schedule(te.create_prim_func([a, d]))
    i, j = sch.get_loops(sch.get_block("D"))
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    for name in ("C", "B"):
        block = sch.get_block(name)
        sch.compute_at(block, i)
        sch.bind(sch.get_loops(block)[-1], "threadIdx.x")
    (kernel,) = lower_gpu(sch.mod["main"], "main", CAPS).kernels
    assert kernel.shared_bytes == 2 * 32 * 4
    x, out = simulated(sch.mod["main"], random_inputs(sch.mod["main"]))
    np.testing.assert_allclose(out, (x[:, ::-1] + 1.0) * 2.0 - 3.0, rtol=1e-6)


def test_shared_tile_under_a_virtual_thread_is_allocated_once_for_both() -> None:
    """The tile staged under the virtual-thread loop holds the rows of both virtual
    threads (64 x 128 floats), in one shared array."""
    sch = Schedule(matmul(64, 64, 4096))
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    vt, ti = sch.split(i, [2, 32])
    ko, ki = sch.split(k, [32, 128])
    sch.reorder(vt, ti, ko, j, ki)
    sch.bind(vt, "vthread.x")
    sch.bind(ti, "threadIdx.x")
    sch.compute_at(sch.cache_read(c, 0, "shared"), ko)
    binary = build_cuda_binary(sch.mod, "cuda -arch=sm_80")
    assert binary.function("main").kernels[0].shared_bytes == 64 * 128 * 4
    assert len(re.findall(r"\.shared \.align 16 \.b8", binary.ptx)) == 1


def test_local_memory_beyond_the_limit_is_refused() -> None:
    sch = Schedule(matmul(256, 256, 16))
    c = sch.get_block("C")
    local = sch.cache_write(c, 0, "local")
    ti, _ = sch.split(sch.get_loops(c)[0], [2, 128])
    sch.bind(ti, "threadIdx.x")
    sch.reverse_compute_at(local, ti)
    with pytest.raises(ScheduleError, match=r"131072 bytes per thread, more than the 65536"):
        build_cuda_binary(sch.mod, "cuda -arch=sm_80")


def test_a_reduction_every_thread_would_update_at_once_is_refused() -> None:
    """Partial sums per thread, then the final sum outside the thread loop: every
    thread would initialize and update S[i] together."""
    x = te.placeholder((16, 512), name="X")
    r = te.reduce_axis((0, 512), name="k")
    s = te.compute((16,), lambda i: te.sum(x[i, r], axis=r), name="S")
    sch = Schedule(te.create_prim_func([x, s]))
    _, k = sch.get_loops(sch.get_block("S"))
    _, ki = sch.split(k, [None, 256])
    rf = sch.rfactor(ki, 1)
    row, outer, inner = sch.get_loops(rf)
    sch.reorder(inner, outer)
    sch.bind(inner, "threadIdx.x")
    sch.bind(row, "blockIdx.x")
    with pytest.raises(ScheduleError, match=r"'S' is updated in place outside any loop bound"):
        build_cuda_binary(sch.mod, "cuda -arch=sm_80")


def test_a_fixed_loop_modulo_a_constant_bounds_to_a_point() -> None:
    """A shared fetch under a fused block loop stages its own block's tile only."""
    from compiler.arith.bounds import bound
    from compiler.ir.expr import IntImm, Range, Var

    bx, tx = Var("bx", "int32"), Var("tx", "int32")
    window = bound(bx % 2 * 32 + tx, {tx: Range(IntImm(0, "int32"), IntImm(32, "int32"))})
    assert (str(window.min), str(window.max)) == ("bx % 2 * 32", "bx % 2 * 32 + 31")


def test_a_stored_gpu_schedule_is_what_build_cuda_ships() -> None:
    """A tuned trace stored for a GPU target is replayed by build_cuda for that target
    only: the same function built for another architecture gets the default schedule."""
    import db
    from compiler.workload.key import workload_key
    from db.record import Measurement

    func = matmul(256, 256, 64)
    tuned = tiled_matmul(256, 256, 64, (64, 64, 8), (4, 4))
    with db.create("memory") as database:
        database.commit_workload(func)
        key = workload_key(func)
        trace = tuned.trace.to_json_string()
        database.commit_records([Measurement(key, "cuda -arch=sm_80", trace, None, (1e-4,))])
        shipped = build_cuda(func, target="cuda -arch=sm_80", database=database)
        default = build_cuda(func, target="cuda -arch=sm_90", database=database)
    assert shipped.ptx.count("bar.sync") == 2
    assert shipped.function("main").kernels[0].shared_bytes == 4096
    assert "bar.sync" not in default.ptx


def test_a_guarded_fetch_stages_only_the_tile() -> None:
    """256 threads copy a 64-element tile under the split's guard ``fused < 64``: the
    shared buffer holds the tile, not all that the unguarded loops could reach."""
    sch = Schedule(matmul(64, 64, 64))
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    bi, ti = sch.split(i, [None, 16])
    bj, tj = sch.split(j, [None, 16])
    ko, ki = sch.split(k, [None, 4])
    sch.reorder(bi, bj, ti, tj, ko, ki)
    for loop, axis in (
        (bi, "blockIdx.y"),
        (bj, "blockIdx.x"),
        (ti, "threadIdx.y"),
        (tj, "threadIdx.x"),
    ):
        sch.bind(loop, axis)
    shared = sch.cache_read(c, 0, "shared")
    sch.compute_at(shared, ko)
    _, y, x = sch.split(sch.fuse(*sch.get_loops(shared)[-2:]), [None, 16, 16])
    sch.bind(y, "threadIdx.y")
    sch.bind(x, "threadIdx.x")
    (kernel,) = lower_gpu(sch.mod["main"], "main", CAPS).kernels
    assert kernel.shared_bytes == 16 * 4 * 4
    a, b, out = simulated(sch.mod["main"], random_inputs(sch.mod["main"]))
    np.testing.assert_allclose(out, a @ b, rtol=1e-5)
