"""Shared libraries: linking object code with the system linker.

The object code is linked by ``ld`` alone, not through a C compiler driver: it needs
no start files, and naming the runtime libraries by their file names
(``libgomp.so.1``, ``libm.so.6``) needs none of their development packages, so a
host that builds candidates needs binutils and libgomp, not a compiler."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

from compiler.errors import CompilerError

RUNTIME_LIBRARIES = ("-l:libgomp.so.1", "-l:libm.so.6")


class ExportError(CompilerError, RuntimeError):
    """Linking or loading a shared library failed; the message has the linker output."""


def link_library(object_code: bytes, path: str) -> None:
    """Link ``object_code`` into the shared library ``path``."""
    linker = shutil.which("ld")
    if linker is None:
        raise ExportError("no linker (ld) on PATH; install binutils")
    with tempfile.TemporaryDirectory() as tmp:
        object_path = os.path.join(tmp, "kernels.o")
        with open(object_path, "wb") as f:
            f.write(object_code)
        command = [linker, "-shared", "-o", path, object_path, *RUNTIME_LIBRARIES]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ExportError(f"linking {path} failed ({' '.join(command)}):\n{done.stderr}")
