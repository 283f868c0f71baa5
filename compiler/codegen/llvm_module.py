"""One LLVM module of textual IR for a set of lowered PrimFuncs.

Each PrimFunc becomes ``void @symbol(ptr noalias %buffers..., i64 %sizes...)``.
The module also carries its functions' signatures as JSON behind
``const char *tensortune_signatures(void)``, so an exported shared library
describes itself to ``load_module``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from compiler.abi.signature import SIGNATURES_SYMBOL, FuncSignature
from compiler.codegen.llvm_context import ModuleContext
from compiler.codegen.llvm_stmt import STACK_LIMIT_BYTES, FunctionEmitter
from compiler.codegen.llvm_types import string_constant
from compiler.codegen.llvm_vector import plan_vector_loops, rolled_vector_loops
from compiler.ir.expr import BufferLoad, byte_size
from compiler.ir.function import PrimFunc
from compiler.ir.layout_free import CONVERTS_WEIGHT_ATTR
from compiler.ir.node import Node, visit
from compiler.ir.stmt import BufferStore, For, ForKind


def emit_module(
    funcs: Mapping[str, PrimFunc],
    signatures: Sequence[FuncSignature],
    num_threads: int,
    triple: str,
    data_layout: str,
    vector_bits: int,
) -> str:
    """Textual LLVM IR for lowered ``funcs``; ``signatures`` give each one's symbol,
    and ``vector_bits`` is the target's vector register width."""
    module = ModuleContext(num_threads, vector_bits)
    module.symbol(SIGNATURES_SYMBOL)
    for signature in signatures:
        module.symbol(signature.symbol)
    for signature in signatures:
        module.functions.append(_emit_function(module, signature.symbol, funcs[signature.name]))
    header = [f'target triple = "{triple}"', f'target datalayout = "{data_layout}"']
    return module.text(header, _signature_getter(signatures))


def _emit_function(module: ModuleContext, symbol: str, func: PrimFunc) -> str:
    emitter = FunctionEmitter(module, symbol)
    emitter.vector_loops = plan_vector_loops(func.body, module.vector_bits, STACK_LIMIT_BYTES)
    emitter.rolled_loops = rolled_vector_loops(func.body, emitter.vector_loops)
    emitter.scalar_loops = scalar_copy_loops(func)
    params = []
    for k, buffer in enumerate(func.params):
        emitter.buffers[id(buffer)] = f"%arg{k}"
        params.append(f"ptr noalias align {byte_size(buffer.dtype)} %arg{k}")
    for k, var in enumerate(func.size_vars):
        emitter.vars[id(var)] = f"%size{k}"
        params.append(f"i64 %size{k}")
    emitter.stmt(func.body)
    return emitter.finish(f"void @{symbol}({', '.join(params)})")


def scalar_copy_loops(func: PrimFunc) -> set[int]:
    """The loops of ``func`` that LLVM must leave rolled and scalar: all of them when
    ``func`` converts a weight (``CONVERTS_WEIGHT_ATTR``) by copying its elements into
    a new layout in serial loops. Such a function runs once per weight: LLVM's
    unroller and vectorizers spent 15-235 ms of a build on its loops (the blocked
    weights of ResNet-18's convolutions, about 4 % of its tuning's build time), and
    the copy ran no faster for it (up to 1.5 ms either way). A conversion that
    computes (Winograd's weight transform) keeps them: scalar, it ran up to 20 times
    longer, in every candidate's measurement."""
    if not func.attrs.get(CONVERTS_WEIGHT_ATTR):
        return set()
    loops: list[For] = []
    copies = True

    def collect(node: Node) -> None:
        nonlocal copies
        if isinstance(node, For):
            loops.append(node)
            copies = copies and node.kind is ForKind.SERIAL
        elif isinstance(node, BufferStore):
            copies = copies and isinstance(node.value, BufferLoad)

    visit(func.body, collect)
    return {id(loop) for loop in loops} if copies else set()


def _signature_getter(signatures: Sequence[FuncSignature]) -> list[str]:
    text = json.dumps([s.to_json() for s in signatures], separators=(",", ":"))
    initializer, length = string_constant(text)
    return [
        f"@.signatures = private unnamed_addr constant [{length} x i8] {initializer}",
        f"define ptr @{SIGNATURES_SYMBOL}() {{",
        "  ret ptr @.signatures",
        "}",
    ]
