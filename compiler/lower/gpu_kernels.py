"""A lowered function as GPU kernels: what each one launches, what memory it uses,
and whether it fits the target.

Each top-level loop nest of the lowered body is one kernel, launched in order.
Its outermost loops bound to ``blockIdx`` give the grid; the loops bound to
``threadIdx`` anywhere in it give the block (per axis, the longest of them; a
shorter one runs on the first threads only). A kernel without bound loops runs
on one thread. Buffers the function allocates at the top, between kernels, live
in global memory as *workspace*. A buffer allocated inside a kernel is

- ``shared`` (one per block) when its scope says so, or when it is a global
  intermediate that threads share (a thread-bound loop lies between its
  allocation and an access);
- ``local`` (one per thread) otherwise; a buffer declared local but shared by
  the threads of a loop is refused, since each thread would see only its own.

Then barriers go in (``gpu_sync``) and the limits of the target are checked:
threads per block and per axis, grid size, shared memory per block. Each refusal
is a ScheduleError naming the limit, so a tuner records the candidate as invalid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from compiler.ir.analysis import free_vars
from compiler.ir.buffer import Buffer
from compiler.ir.expr import BufferLoad, IntImm, ThreadAllReduce
from compiler.ir.function import PrimFunc
from compiler.ir.node import Node, children, transform, visit
from compiler.ir.stmt import Allocate, BufferStore, For, IfThenElse, SeqStmt, Stmt
from compiler.lower.gpu_bindings import verify_thread_bindings
from compiler.lower.gpu_sync import insert_barriers
from compiler.lower.narrow_index import index_bits
from compiler.lower.pipeline import lower_func
from compiler.lower.thread_reduction import lower_thread_reductions
from compiler.lower.virtual_threads import inject_virtual_threads
from compiler.schedule.errors import ScheduleError
from compiler.target.cuda import GPUCapabilities

AXES = ("x", "y", "z")
# What a thread may keep in local memory (CUDA's limit is 512 KiB; far less keeps the
# tile in registers, and more only spills).
MAX_LOCAL_BYTES_PER_THREAD = 64 * 1024


@dataclass(frozen=True)
class Kernel:
    """One kernel: its body (barriers in, loops still marked with their axes), launch
    shape, the global buffers it takes (parameters, then workspace), its shared
    memory in bytes and the width of its index math (``narrow_index``)."""

    body: Stmt
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    buffers: tuple[Buffer, ...]
    shared_bytes: int
    index_bits: int


@dataclass(frozen=True)
class GPUProgram:
    params: tuple[Buffer, ...]
    workspace: tuple[Buffer, ...]
    kernels: tuple[Kernel, ...]


def lower_gpu(func: PrimFunc, name: str, capabilities: GPUCapabilities) -> GPUProgram:
    """Check ``func``'s thread bindings, lower it and split it into kernels that fit
    ``capabilities``; ``name`` words the messages."""
    if func.size_vars:
        raise ScheduleError(
            f"function {name!r} has symbolic sizes {[v.name for v in func.size_vars]}; GPU "
            "kernels are built for fixed shapes: give the workload concrete sizes"
        )
    verify_thread_bindings(func)
    lowered = lower_func(lower_thread_reductions(func))
    workspace: list[Buffer] = []
    nests: list[Stmt] = []
    _collect(lowered.body, workspace, nests)
    global_buffers = (*func.params, *workspace)
    kernels = tuple(_kernel(nest, global_buffers, capabilities) for nest in nests)
    return GPUProgram(tuple(func.params), tuple(workspace), kernels)


def _collect(stmt: Stmt, workspace: list[Buffer], nests: list[Stmt]) -> None:
    """Split the top of the body into workspace allocations and kernel nests."""
    if isinstance(stmt, SeqStmt):
        for child in stmt.seq:
            _collect(child, workspace, nests)
    elif isinstance(stmt, Allocate) and stmt.buffer.scope == "global":
        if not all(isinstance(d, IntImm) for d in stmt.buffer.shape):
            raise ScheduleError(f"buffer {stmt.buffer.name!r} has a symbolic shape")
        workspace.append(stmt.buffer)
        _collect(stmt.body, workspace, nests)
    elif isinstance(stmt, Allocate) and isinstance(stmt.body, SeqStmt):
        raise ScheduleError(
            f"{stmt.buffer.scope} buffer {stmt.buffer.name!r} is used by several kernels (the "
            "top-level loop nests); compute it at a loop of the nest that uses it, or keep it "
            "in global memory"
        )
    else:
        nests.append(stmt)


def _kernel(nest: Stmt, global_buffers: tuple[Buffer, ...], caps: GPUCapabilities) -> Kernel:
    grid, block = _launch_shape(nest)
    _check_launch(grid, block, caps)
    nest = inject_virtual_threads(_place_allocations(nest))
    shared = _check_memory(nest, caps)
    _refuse_redundant_updates(nest, block)
    _check_thread_reductions(nest, block)
    nest = insert_barriers(nest, {f"threadIdx.{a}": block[k] for k, a in enumerate(AXES)})
    used = _global_accesses(nest)
    buffers = tuple(b for b in global_buffers if id(b) in used)
    return Kernel(nest, grid, block, buffers, shared, index_bits(nest))


Dims = tuple[int, int, int]


def _launch_shape(nest: Stmt) -> tuple[Dims, Dims]:
    """The grid (the kernel's outermost blockIdx loops) and the block (per threadIdx
    axis, its longest loop)."""
    grid = [1, 1, 1]
    body = nest
    while isinstance(body, For) and (body.thread_binding or "").startswith("blockIdx"):
        grid[_axis(body)] = _extent(body)
        body = body.body
    _refuse_inner_block_loops(body)
    block = [1, 1, 1]
    for loop in _thread_loops(nest):
        block[_axis(loop)] = max(block[_axis(loop)], _extent(loop))
    return (grid[0], grid[1], grid[2]), (block[0], block[1], block[2])


def _axis(loop: For) -> int:
    """0, 1, 2 for a loop bound to an axis x, y, z."""
    assert loop.thread_binding is not None
    return AXES.index(loop.thread_binding[-1])


def _check_memory(nest: Stmt, caps: GPUCapabilities) -> int:
    """The kernel's shared memory in bytes, refused beyond the target's and a
    thread's local memory beyond ``MAX_LOCAL_BYTES_PER_THREAD``."""
    local = _bytes_in(nest, "local")
    if local > MAX_LOCAL_BYTES_PER_THREAD:
        raise ScheduleError(
            f"the kernel's local buffers take {local} bytes per thread, more than the "
            f"{MAX_LOCAL_BYTES_PER_THREAD} a thread may use; use smaller tiles per thread"
        )
    shared = _bytes_in(nest, "shared")
    if shared > caps.max_shared_bytes_per_block:
        raise ScheduleError(
            f"the kernel needs {shared} bytes of shared memory per block, more than the "
            f"target's {caps.max_shared_bytes_per_block}; use smaller tiles"
        )
    return shared


def _extent(loop: For) -> int:
    if not isinstance(loop.extent, IntImm):
        raise ScheduleError(
            f"loop {loop.loop_var.name!r} bound to {loop.thread_binding} has the symbolic "
            f"extent {loop.extent}"
        )
    return loop.extent.value


def _refuse_inner_block_loops(body: Stmt) -> None:
    def look(n: Node) -> None:
        if isinstance(n, For) and (n.thread_binding or "").startswith("blockIdx"):
            raise ScheduleError(
                f"loop {n.loop_var.name!r} is bound to {n.thread_binding} but is not among the "
                "outermost loops of its kernel; reorder it outside every other loop"
            )

    visit(body, look)


def _thread_loops(nest: Stmt) -> list[For]:
    found: list[For] = []

    def look(n: Node) -> None:
        if isinstance(n, For) and (n.thread_binding or "").startswith("threadIdx"):
            found.append(n)

    visit(nest, look)
    return found


def _check_launch(grid: Dims, block: Dims, caps: GPUCapabilities) -> None:
    threads = math.prod(block)
    if threads > caps.max_threads_per_block:
        raise ScheduleError(
            f"the kernel runs {threads} threads per block ({' x '.join(map(str, block))}), "
            f"more than the target's {caps.max_threads_per_block}; bind fewer iterations "
            "to threadIdx"
        )
    for axis, size, limit in zip(AXES, block, caps.max_block_dims, strict=True):
        if size > limit:
            raise ScheduleError(
                f"threadIdx.{axis} has {size} threads, more than the target's {limit} for that axis"
            )
    for axis, size, limit in zip(AXES, grid, caps.max_grid_dims, strict=True):
        if size > limit:
            raise ScheduleError(
                f"blockIdx.{axis} has {size} blocks, more than the target's {limit} for that axis"
            )


def _place_allocations(nest: Stmt) -> Stmt:
    """Give every buffer allocated in the kernel the memory its use needs."""
    placed: dict[int, Buffer] = {}

    def look(n: Node) -> None:
        if not isinstance(n, Allocate):
            return
        buffer = n.buffer
        crossing = _thread_loop_between(n.body, buffer)
        if not all(isinstance(d, IntImm) for d in buffer.shape):
            raise ScheduleError(
                f"buffer {buffer.name!r} inside a kernel has the symbolic shape "
                f"{list(buffer.shape)}; a kernel's buffers need constant sizes"
            )
        if buffer.scope == "local" and crossing:
            raise ScheduleError(
                f"local buffer {buffer.name!r} is shared by the threads of a loop bound to "
                "threadIdx, but each thread has its own copy; compute it under that loop or "
                "make it shared"
            )
        if buffer.scope == "global":
            scope = "shared" if crossing else "local"
            placed[id(buffer)] = Buffer(buffer.name, buffer.shape, buffer.dtype, scope)

    visit(nest, look)
    return _rescoped(nest, placed) if placed else nest


def _rescoped(nest: Stmt, placed: dict[int, Buffer]) -> Stmt:
    """``nest`` with each buffer in ``placed`` (by identity) replaced by its placed
    copy, in its allocation and every access, in one pass (so nested allocations,
    which a rebuilt parent would copy, are all found)."""

    def swap(n: Node) -> Node | None:
        if isinstance(n, Allocate) and id(n.buffer) in placed:
            return Allocate(placed[id(n.buffer)], n.body)
        if isinstance(n, BufferLoad) and id(n.buffer) in placed:
            return BufferLoad(placed[id(n.buffer)], n.indices)
        if isinstance(n, BufferStore) and id(n.buffer) in placed:
            return BufferStore(placed[id(n.buffer)], n.value, n.indices)
        return None

    return transform(nest, swap)


def _thread_loop_between(body: Stmt, buffer: Buffer) -> bool:
    """Whether a loop bound to threadIdx encloses some access of ``buffer`` in ``body``."""
    found = False

    def walk(n: Node, under_thread: bool) -> None:
        nonlocal found
        if found:
            return
        if isinstance(n, (BufferLoad, BufferStore)) and n.buffer is buffer and under_thread:
            found = True
            return
        if isinstance(n, For) and (n.thread_binding or "").startswith("threadIdx"):
            under_thread = True
        for child in children(n):
            walk(child, under_thread)

    walk(body, False)
    return found


def _bytes_in(nest: Stmt, scope: str) -> int:
    """The bytes of the kernel's buffers in ``scope``, each allocation counted once."""
    total = 0

    def look(n: Node) -> None:
        nonlocal total
        if isinstance(n, Allocate) and n.buffer.scope == scope:
            total += n.buffer.static_nbytes

    visit(nest, look)
    return total


def _refuse_redundant_updates(nest: Stmt, block: Dims) -> None:
    """A store that updates a shared or global element in place (a reduction step)
    must run on one thread per element: under a loop bound to every thread axis the
    block has more than one thread of, else all those threads update it at once."""
    wide = {f"threadIdx.{a}" for a, size in zip(AXES, block, strict=True) if size > 1}

    def walk(n: Node, axes: frozenset[str]) -> None:
        if isinstance(n, For) and (n.thread_binding or "").startswith("threadIdx"):
            axes = axes | {n.thread_binding or ""}
        if isinstance(n, BufferStore) and n.buffer.scope != "local" and _reads_itself(n):
            missing = sorted(wide - axes)
            if missing:
                raise ScheduleError(
                    f"{n.buffer.name!r} is updated in place outside any loop bound to "
                    f"{', '.join(missing)}, so every thread of that axis would update it at "
                    "once; bind a loop around it, or accumulate in a local buffer"
                )
        for child in children(n):
            walk(child, axes)

    walk(nest, frozenset())


def _check_thread_reductions(nest: Stmt, block: Dims) -> None:
    """Every thread of the block must reach a ``ThreadAllReduce`` together (its
    shuffles and barriers wait for all of them), over a power of two of
    ``threadIdx.x`` lanes: one warp's part, or whole warps."""
    threads = math.prod(block)

    def walk(n: Node, divergent: str | None, thread_vars: frozenset[int]) -> None:
        if isinstance(n, ThreadAllReduce):
            lanes = n.lanes
            if divergent is not None:
                raise ScheduleError(
                    f"a reduction shared by {lanes} threads runs {divergent}, so not every "
                    "thread of the block reaches it; give the loops around it the block's "
                    "full thread extents"
                )
            if lanes != block[0] or lanes & (lanes - 1):
                raise ScheduleError(
                    f"a reduction shared by {lanes} threads needs threadIdx.x to have exactly "
                    f"that many (it has {block[0]}), a power of two"
                )
            if threads > 32 and threads % 32:
                raise ScheduleError(
                    f"a reduction shared by threads needs whole warps: the block has {threads} "
                    "threads, not a multiple of 32"
                )
        if isinstance(n, For) and (n.thread_binding or "").startswith("threadIdx"):
            thread_vars = thread_vars | {id(n.loop_var)}
            if _extent(n) < block[_axis(n)] and divergent is None:
                divergent = f"under loop {n.loop_var.name!r}, shorter than the block"
        elif isinstance(n, IfThenElse) and divergent is None:
            if any(id(v) in thread_vars for v in free_vars(n.condition)):
                divergent = f"under the condition {n.condition}"
        for child in children(n):
            walk(child, divergent, thread_vars)

    walk(nest, None, frozenset())


def _reads_itself(store: BufferStore) -> bool:
    found = False

    def look(n: Node) -> None:
        nonlocal found
        found = found or (isinstance(n, BufferLoad) and n.buffer is store.buffer)

    visit(store.value, look)
    return found


def _global_accesses(nest: Stmt) -> set[int]:
    used: set[int] = set()

    def look(n: Node) -> None:
        if isinstance(n, (BufferLoad, BufferStore)) and n.buffer.scope == "global":
            used.add(id(n.buffer))

    visit(nest, look)
    return used
