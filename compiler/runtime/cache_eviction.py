"""Evicting arrays from the CPU's caches, so that the next call reads them from memory.

A model's kernel timed alone in a loop finds its weights in the caches; inside the
model they were last read a whole inference ago. TVM's ``enable_cpu_cache_flush``
therefore evicts every argument but the first before each timed call, and a runner
here evicts a model kernel's weights when asked (``MeasureConfig.cold_weights``).

On x86-64 each cache line of an array is written back and invalidated (CLFLUSH) by a
small function compiled once with LLVM: only the array leaves the caches, and the
kernel's other inputs stay as warm as the previous layer left them. Elsewhere a
buffer larger than any last-level cache is written over, which evicts everything.
"""

from __future__ import annotations

import ctypes
import platform
import threading
from collections.abc import Callable, Sequence

import llvmlite.binding as llvm
import numpy as np

from compiler.target.llvm import init_llvm

# void evict(ptr start, i64 bytes): CLFLUSH every 64-byte line from start (at a line's
# start), then a fence so the evictions are done before the caller goes on.
_EVICT_IR = r"""
declare void @llvm.x86.sse2.clflush(ptr)
declare void @llvm.x86.sse2.mfence()

define void @evict(ptr %start, i64 %bytes) {
entry:
  %empty = icmp sle i64 %bytes, 0
  br i1 %empty, label %done, label %line
line:
  %offset = phi i64 [ 0, %entry ], [ %next, %line ]
  %address = getelementptr i8, ptr %start, i64 %offset
  call void @llvm.x86.sse2.clflush(ptr %address)
  %next = add i64 %offset, 64
  %more = icmp slt i64 %next, %bytes
  br i1 %more, label %line, label %done
done:
  call void @llvm.x86.sse2.mfence()
  ret void
}
"""
_X86_MACHINES = ("x86_64", "amd64")
CACHE_LINE_BYTES = 64
# Written over where no CLFLUSH is available: twice the largest last-level caches.
OVERWRITE_BYTES = 256 << 20

EvictFunction = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)


class _Evictor:
    """The compiled function (its engine must stay alive), or the buffer to write over."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._engine: llvm.ExecutionEngine | None = None
        self._function: Callable[[int, int], None] | None = None
        self._buffer: np.ndarray | None = None

    def evict(self, arrays: Sequence[np.ndarray]) -> None:
        if platform.machine().lower() not in _X86_MACHINES:
            self._overwrite()
            return
        function = self._compiled()
        for array in arrays:
            if not (array.flags.c_contiguous or array.flags.f_contiguous):
                raise ValueError(
                    f"evict_from_caches takes contiguous arrays, got one of strides "
                    f"{array.strides}; pass the array it is a view of"
                )
            start = array.ctypes.data & -CACHE_LINE_BYTES  # the first line it touches
            function(start, array.ctypes.data + array.nbytes - start)

    def _compiled(self) -> Callable[[int, int], None]:
        with self._lock:
            if self._function is None:
                init_llvm()
                module = llvm.parse_assembly(_EVICT_IR)
                module.verify()
                machine = llvm.Target.from_default_triple().create_target_machine()
                self._engine = llvm.create_mcjit_compiler(module, machine)
                self._engine.finalize_object()
                self._function = EvictFunction(self._engine.get_function_address("evict"))
            return self._function

    def _overwrite(self) -> None:
        if self._buffer is None:
            self._buffer = np.zeros(OVERWRITE_BYTES // 8, dtype=np.float64)
        self._buffer += 1.0


_evictor = _Evictor()


def evict_from_caches(arrays: Sequence[np.ndarray]) -> None:
    """Write back and drop every cache line of ``arrays`` (their contents are unchanged),
    so that the next reader fetches them from memory."""
    _evictor.evict(arrays)
