"""Virtual threads (``compiler.lower.virtual_threads``): a loop bound to ``vthread``
interleaved inside each GPU thread. Checked without a GPU: in the simulator
(tests/support/gpu_simulator.py, which refuses races) against numpy, and in the
lowered kernel's structure (the shared tiles fetched once for every virtual
thread, the accumulators expanded per virtual thread)."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_simulator import simulate
from hypothesis import given, settings
from hypothesis import strategies as st
from workloads import matmul

from compiler.ir.node import Node, visit
from compiler.ir.printer import stmt_to_str
from compiler.ir.stmt import Allocate, BufferStore, For, ForKind
from compiler.lower.gpu_kernels import Kernel, lower_gpu
from compiler.lower.virtual_threads import MAX_VIRTUAL_THREADS
from compiler.schedule import Schedule, ScheduleError
from compiler.target.cuda import CudaTarget

CAPS = CudaTarget("sm_80").capabilities


def interleaved_matmul(
    m: int, n: int, k: int, *, vthreads: tuple[int, int], threads: tuple[int, int], step: int
) -> Schedule:
    """A shared-memory GEMM whose block tile is ``vthreads x threads x 2`` per axis:
    each thread computes a 2 x 2 tile in each of its virtual threads' sub-tiles, the
    sub-tiles a block's width of threads apart (the interleaved SGEMM layout)."""
    (vm, vn), (tm, tn) = vthreads, threads
    sch = Schedule(matmul(m, n, k))
    c = sch.get_block("C")
    local = sch.cache_write(c, 0, "local")
    i, j, kk = sch.get_loops(c)
    bi, vi, ti, ii = sch.split(i, [None, vm, tm, 2])
    bj, vj, tj, jj = sch.split(j, [None, vn, tn, 2])
    ko, ki = sch.split(kk, [None, step])
    sch.reorder(bi, bj, vi, vj, ti, tj, ko, ki, ii, jj)
    for loop, axis in (
        (bi, "blockIdx.y"),
        (bj, "blockIdx.x"),
        (vi, "vthread.y"),
        (vj, "vthread.x"),
        (ti, "threadIdx.y"),
        (tj, "threadIdx.x"),
    ):
        sch.bind(loop, axis)
    sch.reverse_compute_at(local, tj)
    for index in (0, 1):
        shared = sch.cache_read(c, index, "shared")
        sch.compute_at(shared, ko)
        fused = sch.fuse(*sch.get_loops(shared)[-2:])
        _, ty, tx = sch.split(fused, [None, tm, tn])
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
    return sch


def product(sch: Schedule, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """What the lowered kernels compute in the simulator, and what numpy does."""
    func = sch.mod["main"]
    rng = np.random.default_rng(seed)
    a, b, c = (
        rng.uniform(-1.0, 1.0, size=[int(d.value) for d in p.shape]).astype(np.float32)  # type: ignore[attr-defined]
        for p in func.params
    )
    c[...] = np.nan
    simulate(lower_gpu(func, "main", CAPS), [a, b, c])
    return c, a.astype(np.float64) @ b.astype(np.float64)


def only_kernel(sch: Schedule) -> Kernel:
    (kernel,) = lower_gpu(sch.mod["main"], "main", CAPS).kernels
    return kernel


def stores_to(kernel: Kernel, scope: str) -> list[BufferStore]:
    found: list[BufferStore] = []

    def look(n: Node) -> None:
        if isinstance(n, BufferStore) and n.buffer.scope == scope:
            found.append(n)

    visit(kernel.body, look)
    return found


def test_interleaved_tiles_compute_the_product() -> None:
    sch = interleaved_matmul(32, 48, 12, vthreads=(2, 2), threads=(4, 4), step=4)
    got, want = product(sch)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_the_shared_tiles_are_fetched_once_for_every_virtual_thread() -> None:
    """Two virtual threads per axis share one staging of the block's tiles: the shared
    memory is that of the whole block tile (not one per virtual thread), each operand
    is copied by one store, and no virtual-thread loop is left around a copy."""
    kernel = only_kernel(interleaved_matmul(32, 32, 8, vthreads=(2, 2), threads=(4, 4), step=4))
    assert kernel.block == (4, 4, 1) and kernel.grid == (2, 2, 1)
    assert kernel.shared_bytes == (16 * 4 + 4 * 16) * 4  # 16 rows and columns, steps of 4
    copies = stores_to(kernel, "shared")
    assert sorted(s.buffer.name for s in copies) == ["A_shared", "B_shared"]
    text = stmt_to_str(kernel.body)
    assert "vthread" not in text
    assert text.count("tvm_storage_sync") == 2


def test_the_accumulators_get_a_slice_per_virtual_thread() -> None:
    """Each thread keeps 2 x 2 accumulators per virtual thread, 2 x 2 of them."""
    kernel = only_kernel(interleaved_matmul(32, 32, 8, vthreads=(2, 2), threads=(4, 4), step=4))
    local: list[Allocate] = []
    visit(kernel.body, lambda n: local.append(n) if isinstance(n, Allocate) else None)
    (accumulator,) = [a for a in local if a.buffer.scope == "local"]
    sizes = [int(d.value) for d in accumulator.buffer.shape]  # type: ignore[attr-defined]
    assert int(np.prod(sizes)) == 2 * 2 * 2 * 2


def test_the_virtual_threads_interleave_in_the_innermost_loops() -> None:
    """The copies per virtual thread are unrolled loops (one per virtual axis) around
    single statements, so an update of one virtual thread's accumulator sits next to
    the others'."""
    kernel = only_kernel(interleaved_matmul(32, 32, 8, vthreads=(2, 2), threads=(4, 4), step=4))
    virtual = ("i_1", "j_1")  # the loops bound to vthread.y and vthread.x
    copies: list[For] = []

    def look(n: Node) -> bool:
        if isinstance(n, For) and n.loop_var.name in virtual:
            copies.append(n)
            return False
        return True

    visit(kernel.body, look)
    assert len(copies) == 3  # the accumulators' init and update, and the write-back
    for loop in copies:
        assert loop.kind is ForKind.UNROLLED and int(loop.extent.value) == 2  # type: ignore[attr-defined]
        inner = loop.body
        assert isinstance(inner, For) and inner.loop_var.name in virtual
        assert isinstance(inner.body, BufferStore)


@settings(max_examples=12, deadline=None)
@given(
    m=st.integers(1, 24),
    n=st.integers(1, 24),
    k=st.integers(1, 9),
    vm=st.sampled_from([1, 2, 4]),
    vn=st.sampled_from([1, 2]),
    tm=st.sampled_from([1, 2, 4]),
    tn=st.sampled_from([2, 4]),
    step=st.sampled_from([1, 2, 4]),
)
def test_any_interleaving_is_right_or_refused(m, n, k, vm, vn, tm, tn, step) -> None:
    """Tiles that do not divide the shapes leave guards inside the virtual threads;
    whatever the primitives and GPU lowering accept computes the product."""
    try:
        sch = interleaved_matmul(m, n, k, vthreads=(vm, vn), threads=(tm, tn), step=step)
        got, want = product(sch, seed=m * n + k)
    except ScheduleError:
        return
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_more_virtual_threads_than_a_thread_interleaves_are_refused() -> None:
    sch = interleaved_matmul(64, 64, 4, vthreads=(4, 4), threads=(2, 2), step=4)
    most = MAX_VIRTUAL_THREADS
    with pytest.raises(ScheduleError, match=f"16 virtual threads, more than the {most}"):
        lower_gpu(sch.mod["main"], "main", CAPS)
