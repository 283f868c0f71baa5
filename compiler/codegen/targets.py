"""Any target: a CPU (``"llvm ..."``) or an NVIDIA GPU (``"cuda -arch=sm_80"``)."""

from __future__ import annotations

from compiler.codegen.cuda_target import CUDA_TARGET_FORM, CudaTarget
from compiler.codegen.target import TARGET_FORMS, LLVMTarget, TargetError

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
