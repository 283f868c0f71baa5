"""Compiled kernels callable from Python on numpy arrays, written as a shared library
and loaded back from one."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from compiler.abi.signature import SIGNATURES_SYMBOL, FuncSignature, RuntimeArgumentError
from compiler.errors import CompilerError
from compiler.lower.prepack import pack_functions
from compiler.runtime.blas_pool import check_not_forked, prepare_pool
from compiler.runtime.export import ExportError, link_library
from compiler.runtime.function_table import FunctionTable
from compiler.runtime.heap import keep_temporaries_in_heap
from compiler.runtime.profiling import ProfileResult, time_raw
from compiler.target.llvm import init_llvm


class Function:
    """One kernel. Calling it checks the arrays against the signature; ``raw`` is
    the bare ctypes function (pointers and sizes), for timing loops.

    ``unrunnable``, when set, says why this host cannot run the kernel (it was built
    for instructions the host lacks): calling it, or taking ``raw``, raises
    ``UnrunnableKernelError`` with that reason instead of letting the process die of
    an illegal instruction."""

    def __init__(
        self,
        signature: FuncSignature,
        address: int,
        keepalive: Any,
        *,
        unrunnable: str | None = None,
    ) -> None:
        self.signature = signature
        pointers = [ctypes.c_void_p] * len(signature.params)
        argtypes = [*pointers, *[ctypes.c_int64] * len(signature.size_vars)]
        self._raw = ctypes.CFUNCTYPE(None, *argtypes)(address)
        self._keepalive = keepalive
        self.unrunnable = unrunnable

    @property
    def raw(self) -> Callable[..., None]:
        if self.unrunnable is not None:
            raise UnrunnableKernelError(f"cannot run {self.name} on this host: {self.unrunnable}")
        return self._raw

    @property
    def name(self) -> str:
        return self.signature.name

    def __call__(self, *arrays: np.ndarray) -> None:
        check_not_forked()
        self.raw(*self.signature.bind(arrays))

    def __repr__(self) -> str:
        params = ", ".join(p.name for p in self.signature.params)
        return f"<Function {self.name}({params})>"


class UnrunnableKernelError(CompilerError, RuntimeError):
    """A kernel built for instructions this host lacks was called here."""


class Module(FunctionTable[Function]):
    """The functions of one build (or one loaded shared library), by name.

    ``source`` is the compiled LLVM module (None for a loaded library);
    ``object_code`` what ``export_library`` links. Before the first module of a
    process exists, numpy's BLAS is moved onto the kernels' thread pool (see
    ``compiler.runtime.blas_pool``), so the two do not fight for the cores, and the C
    library is told to keep the kernels' freed temporaries for their next calls
    (``compiler.runtime.heap``).
    """

    def __init__(
        self,
        functions: Mapping[str, Function],
        *,
        source: Any = None,
        object_code: bytes | None = None,
        library_path: str | None = None,
    ) -> None:
        prepare_pool()
        keep_temporaries_in_heap()
        super().__init__(functions)
        self._source = source
        self.object_code = object_code
        self.library_path = library_path

    def __call__(self, *arrays: np.ndarray) -> None:
        """Call the entry on ``arrays``; refused, saying what to do, when the entry
        takes constant weights converted by pack functions (``compiler.lower.prepack``)."""
        entry = self.entry_name
        packs = pack_functions(self, entry)
        if packs:
            raise RuntimeArgumentError(
                f"{entry} takes its constant weights {sorted(packs)} converted (by "
                f"{', '.join(sorted(packs.values()))}); convert them once with "
                f"compiler.runtime.prepacked.pack_arguments(module, {entry!r}, arrays) and "
                f"call module[{entry!r}] on the result"
            )
        super().__call__(*arrays)

    def time_evaluator(
        self, name: str, number: int = 10, repeat: int = 1, min_repeat_ms: float = 0
    ) -> Callable[..., ProfileResult]:
        """A function that times ``self[name]`` on the arrays it is given."""
        function = self[name]

        def evaluate(*arrays: np.ndarray) -> ProfileResult:
            args = function.signature.bind(arrays)
            return time_raw(function.raw, args, number, repeat, min_repeat_ms)

        return evaluate

    def get_source(self, fmt: str = "ll") -> str:
        """The optimized LLVM IR (``"ll"``) or the target assembly (``"asm"``)."""
        if self._source is None:
            raise ValueError(
                f"module loaded from {self.library_path} has no source; get_source works on "
                "the result of compiler.build"
            )
        if fmt in ("ll", "llvm"):
            return self._source.llvm_ir()
        if fmt in ("asm", "s"):
            return self._source.assembly()
        raise ValueError(f"unknown source format {fmt!r}; use 'll' or 'asm'")

    def export_library(self, path: str) -> None:
        """Write a shared library that ``compiler.load_module`` loads back."""
        export_library(self, path)

    def __repr__(self) -> str:
        return f"<Module {sorted(self._functions)}>"


def export_library(module: Module, path: str) -> None:
    """Link ``module``'s object code into the shared library ``path`` (a module loaded
    from a library has none: that library is copied)."""
    path = os.fspath(path)
    if module.object_code is None:
        if module.library_path is None:
            raise ExportError("this module has neither object code nor a library file")
        shutil.copyfile(module.library_path, path)
        return
    link_library(module.object_code, path)


def load_module(path: str) -> Module:
    """Load a library written by ``export_library``; its functions check their
    arguments like those of a fresh build."""
    init_llvm()
    path = os.path.abspath(os.fspath(path))
    try:
        library = ctypes.CDLL(path)
        getter = getattr(library, SIGNATURES_SYMBOL)
    except (OSError, AttributeError) as err:
        raise ExportError(f"{path} is not a library exported by tensortune: {err}") from err
    getter.restype = ctypes.c_char_p
    signatures = [FuncSignature.from_json(s) for s in json.loads(getter().decode("utf-8"))]
    functions = {}
    for signature in signatures:
        address = ctypes.cast(getattr(library, signature.symbol), ctypes.c_void_p).value
        assert address is not None
        functions[signature.name] = Function(signature, address, library)
    return Module(functions, library_path=path)
