"""A thin, typed layer over the CUDA driver API (``cuda.bindings.driver``).

Every call goes through ``_call``, which turns a failed CUresult into a CudaError
naming the driver call and the result. Device pointers are plain ints; modules,
functions, streams and events are the bindings' opaque handles. The bindings are
imported on first use, so this module imports where they are not installed, and
``cuda_available`` says why a GPU cannot be used instead of raising.

Some failures leave the context unusable for the rest of the process (a kernel
that read an illegal address, a launch that failed): CudaError says so in
``context_lost``, ``lost_context`` remembers the first for the whole process (a
later call may fail differently because of it), and the process must end before
the device is used again.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from compiler.errors import CompilerError, MissingExtraError

# Results after which the context cannot be used again: every later call in the
# process fails with the same result (CUDA driver API, "Error Handling"). An
# unknown error counts as one too: a fresh process costs less than a wrong doubt.
_STICKY_RESULTS = frozenset(
    {
        "CUDA_ERROR_ILLEGAL_ADDRESS",
        "CUDA_ERROR_LAUNCH_TIMEOUT",
        "CUDA_ERROR_ASSERT",
        "CUDA_ERROR_HARDWARE_STACK_ERROR",
        "CUDA_ERROR_ILLEGAL_INSTRUCTION",
        "CUDA_ERROR_MISALIGNED_ADDRESS",
        "CUDA_ERROR_INVALID_ADDRESS_SPACE",
        "CUDA_ERROR_INVALID_PC",
        "CUDA_ERROR_LAUNCH_FAILED",
        "CUDA_ERROR_ECC_UNCORRECTABLE",
        "CUDA_ERROR_UNKNOWN",
    }
)


class CudaError(CompilerError, RuntimeError):
    """A CUDA driver call failed (``call`` and ``result`` name it), or the driver
    cannot be used at all (``call`` is None)."""

    def __init__(self, message: str, *, call: str | None = None, result: str | None = None):
        super().__init__(message)
        self.call = call
        self.result = result

    @property
    def context_lost(self) -> bool:
        """Whether the failure poisoned the context: the process must end."""
        return self.result in _STICKY_RESULTS


_lost: list[CudaError] = []  # the first failure that poisoned a context here


def lost_context() -> CudaError | None:
    """The failure that left this process's CUDA context unusable, if one did."""
    return _lost[0] if _lost else None


def cuda_available() -> str | None:
    """None when CUDA device 0 can be used; else why not (the bindings or the driver
    library missing, cuInit failing, no device)."""
    try:
        if device_count() == 0:
            return "the CUDA driver found no GPU"
    except (CudaError, MissingExtraError) as err:
        return str(err)
    return None


def require_bindings() -> None:
    """Raise MissingExtraError, naming the extra to install, where the CUDA driver
    bindings are not installed."""
    _driver()


def device_count() -> int:
    _init()
    return int(_call("cuDeviceGetCount"))


def device_arch(device: int) -> str:
    """The architecture of GPU ``device`` as a target names it, e.g. ``"sm_80"``."""
    driver = _driver()
    handle = _device(device)
    attribute = driver.CUdevice_attribute
    major = _call(
        "cuDeviceGetAttribute", attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, handle
    )
    minor = _call(
        "cuDeviceGetAttribute", attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, handle
    )
    return f"sm_{major}{minor}"


class PrimaryContext:
    """A reference to GPU ``device``'s primary context, made current on this thread.

    The primary context is the one per device that every user of the driver in the
    process shares; it lives while anyone holds a reference, so a long-lived holder
    saves the next module the cost of creating it again."""

    def __init__(self, device: int) -> None:
        self.device = device
        self._device = _device(device)
        self._handle = _call("cuDevicePrimaryCtxRetain", self._device)
        self._retained = True
        self.make_current()

    def make_current(self) -> None:
        """Bind the context to the calling thread (the driver's state is per thread)."""
        _call("cuCtxSetCurrent", self._handle)

    def release(self) -> None:
        if self._retained:
            self._retained = False
            _call("cuDevicePrimaryCtxRelease", self._device)


def mem_alloc(nbytes: int) -> int:
    """A device buffer of ``nbytes`` (at least one byte: the driver refuses zero)."""
    return int(_call("cuMemAlloc", max(nbytes, 1)))


def mem_free(pointer: int) -> None:
    _call("cuMemFree", pointer)


def copy_to_device(pointer: int, array: np.ndarray) -> None:
    """Copy a C-contiguous ``array`` into the device buffer at ``pointer``."""
    if array.nbytes:
        _call("cuMemcpyHtoD", pointer, array.ctypes.data, array.nbytes)


def copy_to_host(array: np.ndarray, pointer: int) -> None:
    """Copy the device buffer at ``pointer`` into a C-contiguous, writeable ``array``."""
    if array.nbytes:
        _call("cuMemcpyDtoH", array.ctypes.data, pointer, array.nbytes)


def memset_async(pointer: int, nbytes: int, value: int, stream: Any) -> None:
    _call("cuMemsetD8Async", pointer, value, nbytes, stream)


def module_load(cubin: bytes) -> Any:
    return _call("cuModuleLoadData", cubin)


def module_unload(module: Any) -> None:
    _call("cuModuleUnload", module)


def module_function(module: Any, symbol: str) -> Any:
    return _call("cuModuleGetFunction", module, symbol.encode())


class KernelParams:
    """The parameter array ``cuLaunchKernel`` reads: one 64-bit device pointer per
    kernel parameter. Made once and launched many times, so a timing loop spends its
    host time launching rather than packing arguments."""

    def __init__(self, pointers: Sequence[int]) -> None:
        self._values = [ctypes.c_uint64(p) for p in pointers]
        slots = [ctypes.addressof(v) for v in self._values]
        self._array = (ctypes.c_void_p * max(len(slots), 1))(*slots)

    @property
    def address(self) -> int:
        return ctypes.addressof(self._array)


def launch(
    function: Any,
    grid: Sequence[int],
    block: Sequence[int],
    shared_bytes: int,
    params: KernelParams,
    stream: Any,
) -> None:
    """Enqueue ``function`` on ``stream`` with ``shared_bytes`` of dynamic shared memory."""
    _call("cuLaunchKernel", function, *grid, *block, shared_bytes, stream, params.address, 0)


def stream_create() -> Any:
    return _call("cuStreamCreate", 0)


def stream_destroy(stream: Any) -> None:
    _call("cuStreamDestroy", stream)


def stream_synchronize(stream: Any) -> None:
    _call("cuStreamSynchronize", stream)


def event_create() -> Any:
    return _call("cuEventCreate", 0)


def event_destroy(event: Any) -> None:
    _call("cuEventDestroy", event)


def event_record(event: Any, stream: Any) -> None:
    _call("cuEventRecord", event, stream)


def event_elapsed_seconds(start: Any, end: Any) -> float:
    """Seconds between two recorded events; waits for ``end`` to complete first."""
    _call("cuEventSynchronize", end)
    return float(_call("cuEventElapsedTime", start, end)) / 1e3


@functools.cache
def _driver() -> Any:
    try:
        from cuda.bindings import driver  # the optional `cuda` extra
    except ImportError:
        raise MissingExtraError(
            "running on an NVIDIA GPU (CUDA's driver bindings)", "cuda"
        ) from None
    return driver


@functools.cache
def _init() -> None:
    """cuInit, once per process once it succeeds."""
    try:
        _call("cuInit", 0)
    except RuntimeError as err:
        if isinstance(err, CudaError):
            raise
        # cuda.pathfinder: the driver library (libcuda.so) is not on this host.
        raise CudaError(f"the NVIDIA driver library cannot be loaded: {err}") from None


def _device(device: int) -> Any:
    _init()
    count = device_count()
    if not 0 <= device < count:
        raise CudaError(
            f"there is no CUDA device {device}; this host has {count} (0 to {count - 1})"
        )
    return _call("cuDeviceGet", device)


def _call(name: str, *args: Any) -> Any:
    """Call driver function ``name``; its value (None, one value or a tuple) or a
    CudaError naming the call and its result."""
    driver = _driver()
    result, *values = getattr(driver, name)(*args)
    if result != driver.CUresult.CUDA_SUCCESS:
        error = CudaError(
            f"{name} failed: {result.name} ({_describe(result)})", call=name, result=result.name
        )
        if error.context_lost and not _lost:
            _lost.append(error)
        raise error
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def _describe(result: Any) -> str:
    driver = _driver()
    status, text = driver.cuGetErrorString(result)
    if status != driver.CUresult.CUDA_SUCCESS or text is None:
        return "no description"
    return bytes(text).decode(errors="replace")
