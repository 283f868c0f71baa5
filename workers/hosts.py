"""Host kinds: the Ray resource that marks a node as able to measure a target.

A cluster has hosts of different kinds (one CPU model here, another there, later
GPUs). Each Ray node carries one resource per target it measures, named after the
target's hardware: ``target:llvm -mcpu=znver4`` for any ``llvm`` target of that
CPU (thread counts and feature lists do not change the host), ``target:cuda
-arch=sm_80`` for that GPU architecture. The runner sends a candidate only to a
node that has its target's resource, so a time is never taken on the wrong kind of
host. ``tensortune ray-node --target T`` starts a node with T's resource.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping

from workers.base import WorkersError

PREFIX = "target:"
_CUDA_ARCH = re.compile(r"^-arch=(sm_[0-9]+a?)$")


def is_gpu_target(target: str) -> bool:
    """Whether ``target`` is measured on a GPU (a ``cuda ...`` target)."""
    return target.split()[:1] == ["cuda"]


@functools.lru_cache(maxsize=256)
def host_resource(target: str) -> str:
    """The Ray resource of the hosts that measure ``target``; plain ``llvm`` names
    this machine's CPU. Raises WorkersError for a target that names no host kind."""
    if is_gpu_target(target):
        arch = [m[1] for word in target.split()[1:] if (m := _CUDA_ARCH.match(word))]
        if len(arch) != 1:
            raise WorkersError(
                f"target {target!r} names no GPU architecture; give one -arch, e.g. "
                "'cuda -arch=sm_80'"
            )
        return f"{PREFIX}cuda -arch={arch[0]}"
    from compiler.target.errors import TargetError
    from compiler.target.llvm import LLVMTarget

    try:
        parsed = LLVMTarget.parse(target)
    except TargetError as err:
        raise WorkersError(str(err)) from None
    return f"{PREFIX}llvm -mcpu={parsed.cpu}"


def served_targets(resources: Mapping[str, float]) -> frozenset[str]:
    """The host-kind resources among a Ray node's resources."""
    return frozenset(
        name for name, amount in resources.items() if name.startswith(PREFIX) and amount
    )
