"""Shared libraries: linking a module's object code with the system linker, and
loading such a library back as a Module.

The object code is linked by ``ld`` alone, not through a C compiler driver: it needs
no start files, and naming the runtime libraries by their file names
(``libgomp.so.1``, ``libm.so.6``) needs none of their development packages, so a
host that builds candidates needs binutils and libgomp, not a compiler."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import tempfile

from compiler.errors import CompilerError
from compiler.runtime.module import Function, Module
from compiler.runtime.signature import SIGNATURES_SYMBOL, FuncSignature

RUNTIME_LIBRARIES = ("-l:libgomp.so.1", "-l:libm.so.6")


class ExportError(CompilerError, RuntimeError):
    """Linking or loading a shared library failed; the message has the linker output."""


def export_library(module: Module, path: str) -> None:
    """Link ``module``'s object code into the shared library ``path``."""
    path = os.fspath(path)
    if module.object_code is None:
        if module.library_path is None:
            raise ExportError("this module has neither object code nor a library file")
        shutil.copyfile(module.library_path, path)
        return
    linker = shutil.which("ld")
    if linker is None:
        raise ExportError("no linker (ld) on PATH; install binutils")
    with tempfile.TemporaryDirectory() as tmp:
        object_path = os.path.join(tmp, "kernels.o")
        with open(object_path, "wb") as f:
            f.write(module.object_code)
        command = [linker, "-shared", "-o", path, object_path, *RUNTIME_LIBRARIES]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ExportError(f"linking {path} failed ({' '.join(command)}):\n{done.stderr}")


def load_module(path: str) -> Module:
    """Load a library written by ``export_library``; its functions check their
    arguments like those of a fresh build."""
    from compiler.codegen.target import init_llvm

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
