"""CUDA targets: ``"cuda -arch=sm_80"``, the limits a GPU kernel must stay within,
and the PTX version LLVM's NVPTX back end writes for each architecture.

The limits are the architecture's documented ones (CUDA programming guide,
"Technical Specifications per Compute Capability"): a target is named by its
architecture alone, so a schedule tuned for ``sm_80`` is tuned for every GPU of
that compute capability. Shared memory is the static 48 KiB every kernel may use
without opting in to more at launch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from compiler.target.errors import TargetError

CUDA_TARGET_FORM = '"cuda -arch=sm_<major><minor>" (e.g. "cuda -arch=sm_80")'
_ARCH = re.compile(r"^sm_([0-9]+)([0-9])(a?)$")

# The lowest PTX ISA version that knows each architecture (PTX ISA release notes);
# LLVM needs it named as a feature (+ptxNN) to write PTX for the architecture.
_PTX_VERSIONS = {
    (7, 0): 60,
    (7, 2): 61,
    (7, 5): 63,
    (8, 0): 70,
    (8, 6): 71,
    (8, 7): 74,
    (8, 9): 78,
    (9, 0): 78,
    (10, 0): 86,
    (12, 0): 87,
}


@dataclass(frozen=True)
class GPUCapabilities:
    """What GPU spaces size schedules by and what verification refuses beyond."""

    max_threads_per_block: int
    max_block_dims: tuple[int, int, int]
    max_grid_dims: tuple[int, int, int]
    max_shared_bytes_per_block: int
    max_registers_per_block: int
    max_registers_per_thread: int
    warp_size: int


@dataclass(frozen=True)
class CudaTarget:
    """An NVIDIA GPU architecture to generate code for, e.g. ``sm_80``."""

    arch: str

    @staticmethod
    def parse(target: str | CudaTarget) -> CudaTarget:
        if isinstance(target, CudaTarget):
            return target
        tokens = str(target).split()
        if not tokens or tokens[0] != "cuda":
            raise TargetError(f"unknown target {target!r}; a GPU target is {CUDA_TARGET_FORM}")
        arches = [t.partition("=")[2] for t in tokens[1:] if t.startswith("-arch=")]
        others = [t for t in tokens[1:] if not t.startswith("-arch=")]
        if others:
            raise TargetError(
                f"target {target!r}: cannot read option {others[0]!r}; a GPU target is "
                f"{CUDA_TARGET_FORM}"
            )
        if len(arches) != 1:
            raise TargetError(
                f"target {target!r} names no single GPU architecture; write {CUDA_TARGET_FORM}"
            )
        parsed = CudaTarget(arches[0])
        parsed.compute_capability  # noqa: B018 -- refuses an unknown architecture
        return parsed

    @property
    def compute_capability(self) -> tuple[int, int]:
        match = _ARCH.match(self.arch)
        if match is None:
            raise TargetError(
                f"target 'cuda -arch={self.arch}': {self.arch!r} is not an architecture "
                f"name; write {CUDA_TARGET_FORM}"
            )
        capability = (int(match[1]), int(match[2]))
        if capability < (7, 0):
            raise TargetError(
                f"target 'cuda -arch={self.arch}': architectures before sm_70 are not "
                "supported; name sm_70 or later"
            )
        return capability

    @property
    def ptx_version(self) -> int:
        """The PTX ISA version (e.g. 70 for 7.0) that LLVM writes for this architecture."""
        capability = self.compute_capability
        known = [v for cc, v in sorted(_PTX_VERSIONS.items()) if cc <= capability]
        version = known[-1]
        if self.arch.endswith("a"):
            version = max(version, 80)
        return version

    @property
    def capabilities(self) -> GPUCapabilities:
        major, minor = self.compute_capability
        registers_per_block = 32 * 1024 if (major, minor) == (7, 2) else 64 * 1024
        return GPUCapabilities(
            max_threads_per_block=1024,
            max_block_dims=(1024, 1024, 64),
            max_grid_dims=(2**31 - 1, 65535, 65535),
            max_shared_bytes_per_block=48 * 1024,
            max_registers_per_block=registers_per_block,
            max_registers_per_thread=255,
            warp_size=32,
        )

    def __str__(self) -> str:
        return f"cuda -arch={self.arch}"
