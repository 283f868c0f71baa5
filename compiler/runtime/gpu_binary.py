"""A compiled GPU module as plain data: the PTX, the cubin the JIT linker made of
it, and for each function the kernels to launch in order with their grid and block
sizes and the buffers each one takes.

A function may need several kernels (one per top-level loop nest of its lowered
body); buffers it computes in global memory between them are *workspace*, which
the runtime allocates on the device next to the function's parameters. The kernels
may access any buffer 16 bytes at a time: each one must start 16-byte aligned (a
buffer of its own from cuMemAlloc is).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class BufferSpec:
    name: str
    shape: tuple[int, ...]
    dtype: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}

    @staticmethod
    def from_json(data: dict[str, Any]) -> BufferSpec:
        return BufferSpec(
            str(data["name"]), tuple(int(d) for d in data["shape"]), str(data["dtype"])
        )


@dataclass(frozen=True)
class KernelLaunch:
    """One kernel: its PTX entry symbol, its launch shape, and its arguments as
    indices into the function's parameters followed by its workspace."""

    symbol: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    buffers: tuple[int, ...]
    shared_bytes: int

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    def to_json(self) -> dict[str, Any]:
        return {
            "symbol": self.symbol,
            "grid": list(self.grid),
            "block": list(self.block),
            "buffers": list(self.buffers),
            "shared_bytes": self.shared_bytes,
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> KernelLaunch:
        grid, block = tuple(int(d) for d in data["grid"]), tuple(int(d) for d in data["block"])
        assert len(grid) == 3 and len(block) == 3
        return KernelLaunch(
            str(data["symbol"]),
            (grid[0], grid[1], grid[2]),
            (block[0], block[1], block[2]),
            tuple(int(b) for b in data["buffers"]),
            int(data["shared_bytes"]),
        )


@dataclass(frozen=True)
class GPUFunction:
    name: str
    params: tuple[BufferSpec, ...]
    workspace: tuple[BufferSpec, ...]
    kernels: tuple[KernelLaunch, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "params": [p.to_json() for p in self.params],
            "workspace": [w.to_json() for w in self.workspace],
            "kernels": [k.to_json() for k in self.kernels],
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> GPUFunction:
        return GPUFunction(
            str(data["name"]),
            tuple(BufferSpec.from_json(p) for p in data["params"]),
            tuple(BufferSpec.from_json(w) for w in data["workspace"]),
            tuple(KernelLaunch.from_json(k) for k in data["kernels"]),
        )


@dataclass(frozen=True)
class GPUBinary:
    """Everything a CUDA host needs to run the functions of one build."""

    arch: str
    ptx: str
    cubin: bytes
    functions: tuple[GPUFunction, ...]

    def function(self, name: str) -> GPUFunction:
        for function in self.functions:
            if function.name == name:
                return function
        raise KeyError(
            f"no function {name!r} in this GPU module; it has {[f.name for f in self.functions]}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "arch": self.arch,
            "ptx": self.ptx,
            "cubin": base64.b64encode(self.cubin).decode("ascii"),
            "functions": [f.to_json() for f in self.functions],
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> GPUBinary:
        return GPUBinary(
            str(data["arch"]),
            str(data["ptx"]),
            base64.b64decode(data["cubin"]),
            tuple(GPUFunction.from_json(f) for f in data["functions"]),
        )
