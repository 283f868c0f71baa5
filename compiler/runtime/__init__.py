"""The runtime: compiled modules callable on numpy arrays, timing, shared libraries."""

from compiler.runtime.blas_pool import share_pool_with_blas, shared_blas_calls
from compiler.runtime.export import ExportError
from compiler.runtime.module import (
    Function,
    Module,
    UnrunnableKernelError,
    export_library,
    load_module,
)
from compiler.runtime.profiling import ProfileResult

__all__ = [
    "ExportError",
    "Function",
    "Module",
    "ProfileResult",
    "UnrunnableKernelError",
    "export_library",
    "load_module",
    "share_pool_with_blas",
    "shared_blas_calls",
]
