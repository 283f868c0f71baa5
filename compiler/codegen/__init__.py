"""Code generation: lowered PrimFuncs to LLVM IR and machine code."""

from compiler.codegen.llvm_build import CompiledModule, compile_ir, jit_load
from compiler.codegen.llvm_module import emit_module
from compiler.codegen.llvm_types import CodegenError

__all__ = [
    "CodegenError",
    "CompiledModule",
    "compile_ir",
    "emit_module",
    "jit_load",
]
