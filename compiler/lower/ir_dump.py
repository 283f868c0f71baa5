"""Writing the IR of one build to a folder: the input and the output of every lowering
pass, the LLVM IR and the assembly, one file each, numbered in the order they were
made, so a wrong result or a slow kernel can be traced to the step that caused it."""

from __future__ import annotations

import os
import re
from pathlib import Path

from compiler.ir.function import PrimFunc
from compiler.lower.pipeline import PassObserver


class IRDump:
    """Files in ``folder`` (made if missing), named ``NN-<function>-<step>.<ext>``."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._count = 0

    def observer(self, func_name: str) -> PassObserver:
        """The ``observe`` hook of ``lower_func`` for function ``func_name``."""

        def write_pass(pass_name: str, func: PrimFunc) -> None:
            self.write(f"{func_name}-{pass_name}", "py", func.script())

        return write_pass

    def write(self, step: str, extension: str, text: str) -> Path:
        self._count += 1
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", step)
        path = self.folder / f"{self._count:02d}-{safe}.{extension}"
        path.write_text(text if text.endswith("\n") else text + "\n")
        return path
