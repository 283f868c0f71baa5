"""tensortune's compiler core: tensor expressions, loop IR, schedules, LLVM code generation."""

from compiler import te
from compiler.build import build, build_cuda
from compiler.ir import IRModule, PrimFunc
from compiler.lower import lower
from compiler.runtime import load_module
from compiler.schedule import Schedule, ScheduleError

__all__ = [
    "IRModule",
    "PrimFunc",
    "Schedule",
    "ScheduleError",
    "build",
    "build_cuda",
    "load_module",
    "lower",
    "te",
]
