"""tensortune's compiler core: tensor expressions, loop IR, schedules, LLVM code generation."""

from compiler import te
from compiler.ir import IRModule, PrimFunc

__all__ = ["IRModule", "PrimFunc", "te"]
