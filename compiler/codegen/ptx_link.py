"""PTX to cubin through nvJitLink, in this process and without a GPU, with what the
assembler says each kernel uses (registers, shared memory, spills).

The usage comes from ptxas' verbose report in nvJitLink's info log, one block per
entry function::

    ptxas info    : Compiling entry function 'k' for 'sm_80'
    ptxas info    : Function properties for k
    ptxas         .     0 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
    ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem, 360 bytes cmem[0]

A verifier or a cost model reads it to refuse or rank a kernel before it runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from compiler.codegen.llvm_types import CodegenError
from compiler.errors import MissingExtraError

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_[0-9]+a?)'")
_PROPERTIES = re.compile(r"^ptxas\s+info\s+:\s+Function properties for (\S+)")
_SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"^ptxas\s+info\s+:\s+Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


@dataclass(frozen=True)
class KernelUsage:
    """What one kernel uses per thread (registers) and per block (static shared
    memory), and the bytes it spills to local memory per thread."""

    registers: int
    shared_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int


@dataclass(frozen=True)
class LinkedCubin:
    cubin: bytes
    usage: dict[str, KernelUsage]


def link_ptx(ptx: str, arch: str) -> LinkedCubin:
    """Assemble and link ``ptx`` into a cubin for ``arch`` (e.g. ``"sm_80"``).

    Raises CodegenError with nvJitLink's error log when the PTX does not assemble
    for ``arch``, and MissingExtraError (naming the extra to install) when nvJitLink
    is missing."""
    nvjitlink = _nvjitlink()
    options = [f"-arch={arch}", "-O3", "-verbose"]
    try:
        handle = nvjitlink.create(len(options), options)
    except RuntimeError as err:  # cuda.pathfinder: libnvJitLink.so is not found
        raise MissingExtraError(f"linking PTX (libnvJitLink: {err})", "cuda") from None
    except nvjitlink.nvJitLinkError as err:
        raise CodegenError(
            f"nvJitLink refused the options {options} ({err}); name an architecture like "
            "sm_80 that this nvJitLink knows"
        ) from None
    try:
        data = ptx.encode()
        nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "kernels.ptx")
        nvjitlink.complete(handle)
        cubin = _read(nvjitlink.get_linked_cubin_size, nvjitlink.get_linked_cubin, handle)
        info = _read(nvjitlink.get_info_log_size, nvjitlink.get_info_log, handle)
    except nvjitlink.nvJitLinkError as err:
        log = _read(nvjitlink.get_error_log_size, nvjitlink.get_error_log, handle)
        raise CodegenError(
            f"nvJitLink could not link the PTX for {arch} ({err}):\n{_text(log)}"
        ) from None
    finally:
        nvjitlink.destroy(handle)
    return LinkedCubin(cubin, parse_usage(_text(info)))


def parse_usage(info_log: str) -> dict[str, KernelUsage]:
    """Each entry function's usage, from a verbose nvJitLink (ptxas) info log."""
    registers: dict[str, int] = {}
    shared: dict[str, int] = {}
    spills: dict[str, tuple[int, int]] = {}
    entry: str | None = None
    described: str | None = None
    for line in info_log.splitlines():
        if match := _ENTRY.search(line):
            entry = match[1]
        elif match := _PROPERTIES.match(line):
            described = match[1]
        elif (match := _SPILLS.search(line)) and described is not None:
            spills[described] = (int(match[1]), int(match[2]))
        elif (match := _USED.match(line)) and entry is not None:
            registers[entry] = int(match[1])
            smem = _SMEM.search(line)
            shared[entry] = int(smem[1]) if smem else 0
            entry = None
    return {
        name: KernelUsage(count, shared[name], *spills.get(name, (0, 0)))
        for name, count in registers.items()
    }


def _nvjitlink() -> Any:
    try:
        from cuda.bindings import nvjitlink  # the optional `cuda` extra
    except ImportError:
        raise MissingExtraError("linking PTX (NVIDIA's nvJitLink bindings)", "cuda") from None
    return nvjitlink


def _read(size: Any, read: Any, handle: int) -> bytes:
    """One of nvJitLink's outputs (the cubin, a log), whose size is asked first."""
    buffer = bytearray(size(handle))
    if buffer:
        read(handle, buffer)
    return bytes(buffer)


def _text(log: bytes) -> str:
    return log.rstrip(b"\0").decode(errors="replace").strip()
