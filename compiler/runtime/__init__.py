"""The runtime: compiled modules callable on numpy arrays, timing, shared libraries."""

from compiler.runtime.blas_pool import share_pool_with_blas, shared_blas_calls
from compiler.runtime.export import ExportError, export_library, load_module
from compiler.runtime.module import Function, Module
from compiler.runtime.profiling import ProfileResult
from compiler.runtime.signature import FuncSignature, ParamSpec, RuntimeArgumentError

__all__ = [
    "ExportError",
    "FuncSignature",
    "Function",
    "Module",
    "ParamSpec",
    "ProfileResult",
    "RuntimeArgumentError",
    "export_library",
    "load_module",
    "share_pool_with_blas",
    "shared_blas_calls",
]
