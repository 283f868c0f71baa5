"""The runtime: compiled modules callable on numpy arrays, timing, shared libraries."""

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
]
