"""Shared libraries: linking a module's object code with the system ``cc``, and
loading such a library back as a Module."""

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
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        raise ExportError("no C compiler driver (cc, gcc or clang) on PATH to link with")
    with tempfile.TemporaryDirectory() as tmp:
        object_path = os.path.join(tmp, "kernels.o")
        with open(object_path, "wb") as f:
            f.write(module.object_code)
        command = [compiler, "-shared", "-o", path, object_path, "-lgomp", "-lm"]
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
