"""Runs lowered GPU kernels the way a GPU does, in Python, and catches races.

A machine without a GPU cannot launch a kernel, but it can still check that GPU
lowering keeps a schedule's meaning: that thread bindings, shared and local
buffers and barriers compute what the serial loops compute. This interpreter
runs each block's threads as coroutines that stop at every barrier, so a block's
threads advance phase by phase as on the hardware, with

- ``blockIdx``/``threadIdx`` loops reading the block and thread index (a shorter
  loop than the launch size running on the first threads only);
- one shared buffer per block, one local buffer per thread, fresh buffers full of
  NaN, so a read of something nobody wrote shows in the result;
- a race check: within one phase a thread must not read a shared element another
  thread wrote, nor write one another read, nor write a different value than
  another; within one kernel no block may read or overwrite global memory
  another block wrote (blocks never synchronize).

It is a test tool: slow (pure Python), for small shapes.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Generator, Sequence
from typing import Any

import numpy as np
from ir_interpreter import ClosureCompiler, Env, ExprFn

from compiler.ir import expr as E
from compiler.ir.buffer import Buffer
from compiler.ir.stmt import (
    Allocate,
    Barrier,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    SeqStmt,
    Stmt,
)
from compiler.lower.gpu_kernels import AXES, GPUProgram, Kernel


class RaceError(AssertionError):
    """Threads or blocks that touch the same element without a barrier between."""


Thread = tuple[int, int, int]
Run = Generator[Any, Any, None]


def simulate(program: GPUProgram, arrays: Sequence[np.ndarray]) -> None:
    """Run ``program`` on ``arrays`` (its parameters, updated in place)."""
    storage: dict[int, np.ndarray] = {}
    for buffer, array in zip(program.params, arrays, strict=True):
        storage[id(buffer)] = array.reshape(-1)
    for buffer in program.workspace:
        storage[id(buffer)] = _fresh(buffer)
    for kernel in program.kernels:
        _KernelRun(kernel, storage).run()


def _fresh(buffer: Buffer) -> np.ndarray:
    count = math.prod(int(d.value) for d in buffer.shape)
    dtype = np.dtype(buffer.dtype)
    fill: Any = np.nan if dtype.kind == "f" else 0
    return np.full(count, fill, dtype=dtype)


class _KernelRun:
    def __init__(self, kernel: Kernel, storage: dict[int, np.ndarray]) -> None:
        self.kernel = kernel
        self.storage = storage
        self.global_writers: dict[tuple[int, int], int] = {}
        self.global_readers: dict[tuple[int, int], set[int]] = {}

    def run(self) -> None:
        grid = self.kernel.grid
        for block_number, block in enumerate(itertools.product(*(range(n) for n in grid))):
            _BlockRun(self, (block[0], block[1], block[2]), block_number).run()

    def touch_global(self, buffer: Buffer, index: int, block: int, write: bool) -> None:
        key = (id(buffer), index)
        writer = self.global_writers.get(key)
        if write:
            readers = self.global_readers.get(key, set()) - {block}
            if (writer is not None and writer != block) or readers:
                raise RaceError(f"blocks race on {buffer.name}[{index}] in one kernel")
            self.global_writers[key] = block
        else:
            if writer is not None and writer != block:
                raise RaceError(
                    f"block {block} reads {buffer.name}[{index}] that block {writer} wrote "
                    "in the same kernel"
                )
            self.global_readers.setdefault(key, set()).add(block)


class _BlockRun:
    def __init__(self, kernel_run: _KernelRun, block: Thread, number: int) -> None:
        self.kernel_run = kernel_run
        self.kernel = kernel_run.kernel
        self.block = block
        self.number = number
        self.shared: dict[int, np.ndarray] = {}
        self.phase_writes: dict[tuple[int, int], tuple[set[Thread], float]] = {}
        self.phase_reads: dict[tuple[int, int], set[Thread]] = {}

    def run(self) -> None:
        dims = self.kernel.block
        threads = [
            (x, y, z) for z in range(dims[2]) for y in range(dims[1]) for x in range(dims[0])
        ]
        runs = {t: _ThreadRun(self, t).stmt(self.kernel.body, {}) for t in threads}
        replies: dict[Thread, Any] = {}
        while runs:
            waiting: dict[Thread, Any] = {}
            for thread, run in runs.items():
                try:
                    waiting[thread] = run.send(replies.get(thread))
                except StopIteration:
                    pass
            if waiting and len(waiting) != len(runs):
                raise RaceError(
                    f"block {self.block}: {len(waiting)} of {len(runs)} threads wait at a "
                    "barrier the others never reach"
                )
            replies = _all_reduced(waiting)
            runs = {t: runs[t] for t in waiting}
            self.phase_writes.clear()
            self.phase_reads.clear()

    def shared_array(self, buffer: Buffer) -> np.ndarray:
        array = self.shared.get(id(buffer))
        if array is None:
            array = self.shared[id(buffer)] = _fresh(buffer)
        return array

    def touch_shared(self, buffer: Buffer, index: int, thread: Thread, value: Any) -> None:
        key = (id(buffer), index)
        written = self.phase_writes.get(key)
        if value is None:
            if written is not None and thread not in written[0]:
                raise RaceError(
                    f"thread {thread} reads {buffer.name}[{index}] that thread "
                    f"{next(iter(written[0]))} wrote without a barrier between"
                )
            self.phase_reads.setdefault(key, set()).add(thread)
            return
        readers = self.phase_reads.get(key, set()) - {thread}
        if readers:
            raise RaceError(
                f"thread {thread} overwrites {buffer.name}[{index}] that thread "
                f"{next(iter(readers))} read without a barrier between"
            )
        if written is not None and not _same(written[1], value):
            raise RaceError(f"threads write different values to {buffer.name}[{index}]")
        writers = written[0] if written is not None else set()
        self.phase_writes[key] = (writers | {thread}, value)


_COMBINES = {"sum": np.add, "product": np.multiply, "max": np.maximum, "min": np.minimum}


def _all_reduced(waiting: dict[Thread, Any]) -> dict[Thread, Any]:
    """Each thread's result of the ``ThreadAllReduce`` the block's threads wait at
    (they yield it with their value), or nothing where they wait at a barrier (they
    yield None)."""
    reductions = {id(w[0]) for w in waiting.values() if w is not None}
    if not reductions:
        return {}
    if len(reductions) > 1 or any(w is None for w in waiting.values()):
        raise RaceError("the threads of a block wait at different synchronisations")
    node = next(iter(waiting.values()))[0]
    groups: dict[tuple[int, int, int], list[Thread]] = {}
    for thread in waiting:
        groups.setdefault((thread[0] // node.lanes, thread[1], thread[2]), []).append(thread)
    replies = {}
    for members in groups.values():
        values = [waiting[t][1] for t in sorted(members)]
        total = values[0]
        for value in values[1:]:
            total = _COMBINES[node.combine](total, value)
        replies.update(dict.fromkeys(members, total))
    return replies


def _same(a: Any, b: Any) -> bool:
    return bool(a == b or (a != a and b != b))


class _ThreadRun:
    def __init__(self, block_run: _BlockRun, thread: Thread) -> None:
        self.block_run = block_run
        self.thread = thread
        self.local: dict[int, np.ndarray] = {}

    def stmt(self, s: Stmt, env: Env) -> Run:
        if isinstance(s, SeqStmt):
            for child in s.seq:
                yield from self.stmt(child, env)
        elif isinstance(s, Barrier):
            yield
        elif isinstance(s, BufferStore) and isinstance(s.value, E.ThreadAllReduce):
            index = int(self.expr(s.indices[0], env))
            combined = yield (s.value, self.expr(s.value.value, env))
            self.store(s.buffer, index, combined)
        elif isinstance(s, BufferStore):
            index = int(self.expr(s.indices[0], env))
            self.store(s.buffer, index, self.expr(s.value, env))
        elif isinstance(s, IfThenElse):
            if self.expr(s.condition, env):
                yield from self.stmt(s.then_case, env)
            elif s.else_case is not None:
                yield from self.stmt(s.else_case, env)
        elif isinstance(s, Allocate):
            if s.buffer.scope == "local":
                self.local[id(s.buffer)] = _fresh(s.buffer)
            yield from self.stmt(s.body, env)
        elif isinstance(s, For):
            yield from self.loop(s, env)
        elif isinstance(s, Evaluate):
            self.expr(s.value, env)
        else:
            raise TypeError(f"cannot simulate {type(s).__name__}")

    def loop(self, s: For, env: Env) -> Run:
        start, extent = int(self.expr(s.min, env)), int(self.expr(s.extent, env))
        axis = s.thread_binding or ""
        if s.kind is ForKind.THREAD_BINDING and axis.startswith(("blockIdx", "threadIdx")):
            kind, _, dim = axis.partition(".")
            source = self.block_run.block if kind == "blockIdx" else self.thread
            value = source[AXES.index(dim)]
            if value < extent:
                yield from self.stmt(s.body, {**env, s.loop_var: start + value})
            return
        for value in range(start, start + extent):
            yield from self.stmt(s.body, {**env, s.loop_var: value})

    def array(self, buffer: Buffer) -> np.ndarray:
        if buffer.scope == "local":
            return self.local[id(buffer)]
        if buffer.scope == "shared":
            return self.block_run.shared_array(buffer)
        return self.block_run.kernel_run.storage[id(buffer)]

    def store(self, buffer: Buffer, index: int, value: Any) -> None:
        array = self.array(buffer)
        if not 0 <= index < array.size:
            raise IndexError(f"store to {buffer.name}[{index}] outside its {array.size} elements")
        value = array.dtype.type(value)
        self.check(buffer, index, value)
        array[index] = value

    def load(self, buffer: Buffer, index: int) -> Any:
        array = self.array(buffer)
        if not 0 <= index < array.size:
            raise IndexError(f"load of {buffer.name}[{index}] outside its {array.size} elements")
        self.check(buffer, index, None)
        return array[index]

    def check(self, buffer: Buffer, index: int, value: Any) -> None:
        if buffer.scope == "shared":
            self.block_run.touch_shared(buffer, index, self.thread, value)
        elif buffer.scope == "global":
            run = self.block_run
            run.kernel_run.touch_global(buffer, index, run.number, value is not None)

    def expr(self, e: E.PrimExpr, env: Env) -> Any:
        return _EXPRESSIONS.compiled(e)({**env, _THREAD: self})


_THREAD = object()


class _SimulatedLoads(ClosureCompiler):
    """The interpreter's expression closures, with loads going through the thread
    (which picks the block's or thread's copy of a buffer and checks for races);
    each expression is compiled once."""

    def __init__(self) -> None:
        self._cache: dict[int, tuple[E.PrimExpr, ExprFn]] = {}

    def compiled(self, e: E.PrimExpr) -> ExprFn:
        entry = self._cache.get(id(e))
        if entry is None or entry[0] is not e:
            entry = self._cache[id(e)] = (e, self.expr(e))
        return entry[1]

    def load(self, e: E.BufferLoad) -> ExprFn:
        index = self.expr(e.indices[0])
        buffer = e.buffer
        return lambda env: env[_THREAD].load(buffer, int(index(env)))


_EXPRESSIONS = _SimulatedLoads()
