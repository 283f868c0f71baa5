"""Code generation: lowered PrimFuncs to LLVM IR and machine code."""

from compiler.codegen.llvm_build import CompiledModule, compile_ir, jit_load
from compiler.codegen.llvm_module import SIGNATURES_SYMBOL, emit_module
from compiler.codegen.llvm_types import CodegenError
from compiler.codegen.target import LLVMTarget, TargetError, target_machine

__all__ = [
    "SIGNATURES_SYMBOL",
    "CodegenError",
    "CompiledModule",
    "LLVMTarget",
    "TargetError",
    "compile_ir",
    "emit_module",
    "jit_load",
    "target_machine",
]
