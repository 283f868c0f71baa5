"""The LLVM IR as tensortune's code generator wrote it, before LLVM optimized it."""

from __future__ import annotations

import pathlib

import compiler
from compiler.ir import IRModule
from compiler.ir.function import PrimFunc


def emitted_ir(func: IRModule | PrimFunc, folder: pathlib.Path, target: str) -> str:
    """Build ``func`` for ``target`` with its IR dumped into ``folder``; the emitted text."""
    compiler.build(func, target=target, dump_ir=folder)
    (path,) = [p for p in folder.iterdir() if p.name.endswith("-llvm.ll")]
    return path.read_text()
