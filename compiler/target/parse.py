"""Any target: a CPU (``"llvm ..."``) or an NVIDIA GPU (``"cuda -arch=sm_80"``), read
from its string, and the one spelling records are stored under."""

from __future__ import annotations

from compiler.target.cuda import CUDA_TARGET_FORM, CudaTarget
from compiler.target.errors import TargetError
from compiler.target.llvm import TARGET_FORMS, LLVMTarget

Target = LLVMTarget | CudaTarget


def target_kind(target: str | Target) -> str:
    """``"cuda"`` for a GPU target, ``"llvm"`` for a CPU one: which templates and
    rules a space uses, and which code generator builds."""
    return "cuda" if isinstance(parse_target(target), CudaTarget) else "llvm"


def parse_target(target: str | Target) -> Target:
    """The target ``target`` names; raises TargetError naming the allowed forms."""
    if isinstance(target, (LLVMTarget, CudaTarget)):
        return target
    words = str(target).split()
    if words and words[0] == "cuda":
        return CudaTarget.parse(str(target))
    if words and words[0] == "llvm":
        return LLVMTarget.parse(str(target))
    raise TargetError(
        f"unknown target {target!r}; the allowed forms are {', '.join(TARGET_FORMS)} and "
        f"{CUDA_TARGET_FORM}"
    )


def canonical_target(target: str | Target) -> str:
    """The one spelling of a target that records are stored and looked up under:
    ``"llvm"`` becomes ``"llvm -mcpu=<host cpu> -mattr=<its code-generation
    features>"``, so records made on one CPU are never mistaken for another's."""
    return str(parse_target(target))


def target_host_kind(target: str | Target) -> str:
    """What a target says about the hardware, for people reading the database."""
    parsed = parse_target(target)
    if isinstance(parsed, CudaTarget):
        major, minor = parsed.compute_capability
        return f"NVIDIA GPU, compute capability {major}.{minor}"
    return f"{parsed.cpu}, {parsed.vector_bits}-bit vectors, {parsed.threads} threads"
