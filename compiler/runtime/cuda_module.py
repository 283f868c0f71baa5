"""A GPUBinary loaded on a CUDA device, callable on numpy arrays like the CPU Module.

Calling a function copies every parameter to the device, allocates its workspace,
launches its kernels in order on the module's stream, waits, and copies every
parameter back into the arrays, so outputs appear in place. A binary does not say
which parameters a function writes, hence every one goes both ways.

Device memory is freed deterministically: by ``close()`` (or leaving a ``with``
block), else when the module is garbage collected. A kernel that faults poisons
the process's context (``CudaError.context_lost``); releasing then frees nothing
more and raises nothing, since the driver frees everything when the process ends.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from compiler.abi.signature import RuntimeArgumentError
from compiler.runtime import cuda_driver as cu
from compiler.runtime.function_table import FunctionTable, entry_of
from compiler.runtime.gpu_binary import BufferSpec, GPUBinary, GPUFunction
from compiler.runtime.profiling import ProfileResult, time_loops


def entry_name(binary: GPUBinary) -> str:
    """The function that calling a module of ``binary`` runs: "main", or the only one."""
    return entry_of([f.name for f in binary.functions])


def check_arguments(function: GPUFunction, arrays: Sequence[Any]) -> None:
    """Raise RuntimeArgumentError unless ``arrays`` fit ``function``'s parameters:
    numpy arrays of their shapes and dtypes, C-contiguous, writeable (each is copied
    back) and sharing no memory."""
    if len(arrays) != len(function.params):
        names = ", ".join(p.name for p in function.params)
        raise RuntimeArgumentError(
            f"{function.name} takes {len(function.params)} arguments ({names}), got {len(arrays)}"
        )
    for spec, array in zip(function.params, arrays, strict=True):
        _check_array(function.name, spec, array)
    for i, first in enumerate(arrays):
        for j in range(i + 1, len(arrays)):
            if np.may_share_memory(first, arrays[j]):
                raise RuntimeArgumentError(
                    f"{function.name}: arguments {function.params[i].name!r} and "
                    f"{function.params[j].name!r} share memory, and every parameter is copied "
                    "back from the GPU; pass distinct arrays"
                )


def _check_array(function: str, spec: BufferSpec, array: Any) -> None:
    what = f"{function}: argument {spec.name!r}"
    if not isinstance(array, np.ndarray):
        raise RuntimeArgumentError(f"{what} must be a numpy array, got {type(array).__name__}")
    if array.dtype != _np_dtype(spec.dtype):
        raise RuntimeArgumentError(
            f"{what} must have dtype {spec.dtype}, got {array.dtype}; convert it with "
            f".astype({spec.dtype!r})"
        )
    if array.shape != spec.shape:
        raise RuntimeArgumentError(f"{what} must have shape {spec.shape}, got {array.shape}")
    if not array.flags.c_contiguous:
        raise RuntimeArgumentError(f"{what} must be C-contiguous; pass np.ascontiguousarray(...)")
    if not array.flags.writeable:
        raise RuntimeArgumentError(
            f"{what} is read-only, but every parameter is copied back from the GPU after the "
            "call; pass a writeable copy (np.array(...))"
        )


def _np_dtype(dtype: str) -> np.dtype:
    return np.dtype(np.bool_ if dtype == "bool" else dtype)


def _nbytes(spec: BufferSpec) -> int:
    return math.prod(spec.shape) * _np_dtype(spec.dtype).itemsize


class _DeviceState:
    """What a module holds on the device; released once, by ``close`` or the garbage
    collector (a ``weakref.finalize`` of the module calls ``release``)."""

    def __init__(self, device: int) -> None:
        self.context = cu.PrimaryContext(device)
        self.module: Any = None
        self.stream: Any = None
        self.allocations: set[int] = set()
        self.released = False

    def alloc(self, nbytes: int) -> int:
        pointer = cu.mem_alloc(nbytes)
        self.allocations.add(pointer)
        return pointer

    def free(self, pointer: int) -> None:
        if pointer in self.allocations:
            self.allocations.discard(pointer)
            cu.mem_free(pointer)

    def release(self) -> None:
        """Free every buffer, the module, the stream and the context reference; try
        each step, then raise the first failure (none when the context is lost)."""
        self.released = True
        steps: list[Callable[[], None]] = [self.context.make_current]
        steps += [partial(cu.mem_free, p) for p in self.allocations]
        self.allocations = set()
        if self.module is not None:
            steps.append(partial(cu.module_unload, self.module))
        if self.stream is not None:
            steps.append(partial(cu.stream_destroy, self.stream))
        steps.append(self.context.release)
        _run_all(steps)


def _run_all(steps: Sequence[Callable[[], None]]) -> None:
    """Run every release step; then raise the first failure, unless the context is
    lost, when failing to release is expected and the process's end frees it all."""
    first: cu.CudaError | None = None
    for step in steps:
        try:
            step()
        except cu.CudaError as err:
            first = first or err
    if first is not None and cu.lost_context() is None:
        raise first


class CudaFunction:
    """One function of a loaded GPUBinary: its kernels, resolved in the module."""

    def __init__(self, module: CudaModule, spec: GPUFunction, kernels: Sequence[Any]) -> None:
        self.spec = spec
        self._module = module
        self._kernels = tuple(kernels)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def kernels(self) -> tuple[Any, ...]:
        """The loaded kernels, in launch order (``spec.kernels`` says how)."""
        return self._kernels

    def __call__(self, *arrays: np.ndarray) -> None:
        with self.bind(arrays) as call:
            call.run()
            call.read_back(arrays)

    def bind(self, arrays: Sequence[np.ndarray]) -> DeviceCall:
        """Check ``arrays``, copy them to the device and allocate the workspace."""
        check_arguments(self.spec, arrays)
        self._module._state.context.make_current()
        return DeviceCall(self._module, self.spec, self._kernels, arrays)

    def __repr__(self) -> str:
        return f"<CudaFunction {self.name}({', '.join(p.name for p in self.spec.params)})>"


class _CallBuffers:
    """What one DeviceCall holds on the device; released once, by ``close`` or the
    garbage collector."""

    def __init__(self, state: _DeviceState) -> None:
        self.state = state
        self.pointers: list[int] = []
        self.events: list[Any] = []
        self.flush: tuple[int, int] | None = None  # (pointer, bytes)

    def release(self) -> None:
        """Free the call's buffers and events, unless its module went first and took
        them along (its context reference, which held the events, is gone)."""
        state = self.state
        if state.released:
            return
        steps: list[Callable[[], None]] = [state.context.make_current]
        steps += [partial(cu.event_destroy, e) for e in self.events]
        pointers = [*self.pointers, *([self.flush[0]] if self.flush else [])]
        steps += [partial(state.free, p) for p in pointers]
        self.pointers, self.events, self.flush = [], [], None
        _run_all(steps)


class DeviceCall:
    """One call's buffers on the device (the parameters, copied in, then the
    workspace), ready to launch the function's kernels on, again and again."""

    def __init__(
        self,
        module: CudaModule,
        spec: GPUFunction,
        kernels: Sequence[Any],
        arrays: Sequence[np.ndarray],
    ) -> None:
        self._module = module  # kept alive: its context holds these buffers
        self._stream = module._state.stream
        self._buffers = _CallBuffers(module._state)
        self._finalizer = weakref.finalize(self, self._buffers.release)
        pointers = self._buffers.pointers
        try:
            for buffer in (*spec.params, *spec.workspace):
                pointers.append(module._state.alloc(_nbytes(buffer)))
            for pointer, array in zip(pointers[: len(arrays)], arrays, strict=True):
                cu.copy_to_device(pointer, array)
        except BaseException:
            self.close()
            raise
        self._launches = [
            (kernel, launch, cu.KernelParams([pointers[b] for b in launch.buffers]))
            for kernel, launch in zip(kernels, spec.kernels, strict=True)
        ]

    def launch(self) -> None:
        """Enqueue every kernel, in order, on the module's stream. A kernel's shared
        memory (``KernelLaunch.shared_bytes``) is declared in its PTX, so the cubin
        carries it: the launch asks for no dynamic shared memory on top."""
        for kernel, launch, params in self._launches:
            cu.launch(kernel, launch.grid, launch.block, 0, params, self._stream)

    def run(self) -> float:
        """Launch the kernels once and wait for them; the seconds they took."""
        return self._loop_seconds(1)

    def read_back(self, arrays: Sequence[np.ndarray]) -> None:
        """Copy every parameter from the device into ``arrays``."""
        cu.stream_synchronize(self._stream)
        pointers = self._buffers.pointers
        for pointer, array in zip(pointers[: len(arrays)], arrays, strict=True):
            cu.copy_to_host(array, pointer)

    def time(
        self,
        number: int,
        repeat: int,
        min_repeat_ms: float,
        *,
        warmup: int = 1,
        flush_bytes: int = 0,
    ) -> ProfileResult:
        """Time the kernel sequence as ``profiling.time_raw`` times a CPU kernel, with
        CUDA events around each loop of ``number`` launches: ``warmup`` untimed runs,
        ``number`` grown until a loop takes ``min_repeat_ms``, then ``repeat`` loops.
        With ``flush_bytes``, a device buffer that large is overwritten before each
        loop, outside the timing, so every loop starts with a cold L2 cache."""
        flush = partial(self._flush_cache, flush_bytes) if flush_bytes else None
        return time_loops(
            self.launch,
            self._loop_seconds,
            number,
            repeat,
            min_repeat_ms,
            warmup=warmup,
            before_repeat=flush,
        )

    def _loop_seconds(self, number: int) -> float:
        events = self._buffers.events
        if not events:
            events += [cu.event_create(), cu.event_create()]
        start, end = events
        cu.event_record(start, self._stream)
        for _ in range(number):
            self.launch()
        cu.event_record(end, self._stream)
        return cu.event_elapsed_seconds(start, end)

    def _flush_cache(self, nbytes: int) -> None:
        buffers = self._buffers
        if buffers.flush is None or buffers.flush[1] != nbytes:
            if buffers.flush is not None:
                buffers.state.free(buffers.flush[0])
            buffers.flush = (buffers.state.alloc(nbytes), nbytes)
        cu.memset_async(buffers.flush[0], nbytes, 1, self._stream)

    def close(self) -> None:
        """Free this call's buffers and events; idempotent."""
        self._finalizer()

    def __enter__(self) -> DeviceCall:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class CudaModule(FunctionTable[CudaFunction]):
    """The functions of a GPUBinary, loaded on GPU ``device`` (of those this process
    sees: ``CUDA_VISIBLE_DEVICES`` chooses), by name."""

    def __init__(self, binary: GPUBinary, device: int = 0) -> None:
        self.binary = binary
        self.device = device
        self._state = _DeviceState(device)
        self._finalizer = weakref.finalize(self, self._state.release)
        try:
            _check_arch(binary.arch, cu.device_arch(device), device)
            self._state.stream = cu.stream_create()
            self._state.module = cu.module_load(binary.cubin)
            functions = {f.name: self._resolve(f) for f in binary.functions}
            FunctionTable.__init__(self, functions, "GPU module")
        except BaseException:
            self.close()
            raise

    def _resolve(self, spec: GPUFunction) -> CudaFunction:
        kernels = [cu.module_function(self._state.module, k.symbol) for k in spec.kernels]
        return CudaFunction(self, spec, kernels)

    def allocate(self, nbytes: int) -> int:
        """``nbytes`` of device memory that the module frees when it closes."""
        self._state.context.make_current()
        return self._state.alloc(max(nbytes, 1))

    def launches(self, name: str, params: Sequence[int]) -> list[Callable[[], None]]:
        """Calls that enqueue the kernels of function ``name``, in order, on the
        module's stream, with ``params`` (device pointers, one per parameter) as its
        parameters; its workspace is allocated here, once."""
        function = self[name]
        spec = function.spec
        if len(params) != len(spec.params):
            raise RuntimeArgumentError(
                f"{name} takes {len(spec.params)} buffers, got {len(params)} pointers"
            )
        pointers = [*params, *(self.allocate(_nbytes(b)) for b in spec.workspace)]
        stream = self._state.stream
        return [
            partial(
                cu.launch,
                kernel,
                launch.grid,
                launch.block,
                0,
                cu.KernelParams([pointers[b] for b in launch.buffers]),
                stream,
            )
            for kernel, launch in zip(function.kernels, spec.kernels, strict=True)
        ]

    def synchronize(self) -> None:
        """Wait for everything enqueued on the module's stream."""
        cu.stream_synchronize(self._state.stream)

    def time_evaluator(
        self, name: str, number: int = 10, repeat: int = 1, min_repeat_ms: float = 0
    ) -> Callable[..., ProfileResult]:
        """A function that times ``self[name]`` on the arrays it is given: they are
        copied to the device once, and the results stay there."""
        function = self[name]

        def evaluate(*arrays: np.ndarray) -> ProfileResult:
            with function.bind(arrays) as call:
                return call.time(number, repeat, min_repeat_ms)

        return evaluate

    def close(self) -> None:
        """Free the module's device memory, module and stream; idempotent."""
        self._finalizer()

    def __enter__(self) -> CudaModule:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<CudaModule {self.binary.arch} on device {self.device} {sorted(self._functions)}>"


def _check_arch(binary_arch: str, device_arch: str, device: int) -> None:
    """A cubin runs on its own architecture and on later minor versions of the same
    major (sm_80 on sm_86), never across majors; one for sm_90a on sm_90 alone."""
    binary, present = _capability(binary_arch), _capability(device_arch)
    specific = binary_arch.endswith("a")  # sm_90a: that architecture alone
    if binary[0] != present[0] or binary[1] > present[1] or (specific and binary != present):
        raise cu.CudaError(
            f"the binary is built for {binary_arch} and GPU {device} is {device_arch}; build "
            f"it for the target 'cuda -arch={device_arch}'"
        )


def _capability(arch: str) -> tuple[int, int]:
    digits = arch.removeprefix("sm_").rstrip("a")
    return int(digits[:-1]), int(digits[-1])
