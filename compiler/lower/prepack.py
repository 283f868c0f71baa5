"""Convert a constant weight's layout once, not on every call.

``transform_layout`` of an input parameter leaves the function's signature alone
and converts the parameter at the start of every call, in a block annotated
``layout_rewrite``. For a weight that stays the same across calls (a conv2d's or
dense's kernel) that work is wasted after the first call. ``prepack`` splits such
a conversion out of the function: the function then takes the weight already in
the new layout, and a second function ``<name>__pack_<param>`` (parameters: the
weight, the converted weight) does the conversion, to be called once per weight.
This is TVM's ``layout_free_placeholders``: a function marks its constant
parameters (``compiler.ir.layout_free``) and every build splits their conversions
out (``prepack_layout_free``), or a caller names the parameters at build time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from compiler.errors import CompilerError
from compiler.ir.buffer import Buffer
from compiler.ir.function import IRModule, PrimFunc
from compiler.ir.layout_free import CONVERTS_WEIGHT_ATTR, LAYOUT_REWRITE_ATTR, layout_free_params
from compiler.ir.stmt import Block, BlockRealize, Stmt, seq, true_predicate
from compiler.schedule.primitives.dataflow import (
    leaf_realizes,
    readers,
    reads_of,
    scope_children,
    writers,
    writes_of,
)

PACK_SUFFIX = "__pack_"


class PrepackError(CompilerError, ValueError):
    """A parameter named for prepacking has no conversion that can be split out."""


def prepack(mod: IRModule, params: Sequence[str]) -> IRModule:
    """``mod`` with the layout conversion of each parameter in ``params`` split out of
    every function that has one (see the module docstring)."""
    functions = dict(mod.items())
    for param in params:
        hits = [name for name, func in functions.items() if _conversion(func, param)]
        if not hits:
            raise PrepackError(
                f"prepack: no function converts a parameter {param!r} at its top level; the "
                f"parameters with a layout conversion are {_convertible(functions)}; apply "
                "transform_layout to the weight and keep its conversion block at the root"
            )
        for name in hits:
            main, pack = split_conversion(functions[name], param)
            functions[name] = main
            functions[pack_function_name(name, param)] = pack
    return IRModule(functions)


def prepack_layout_free(mod: IRModule) -> IRModule:
    """``mod`` with the layout conversion of every parameter a function marks
    constant split out, where the function has one."""
    functions = dict(mod.items())
    for name, func in mod.items():
        functions[name], packs = split_layout_free(func)
        for param, pack in packs.items():
            functions[pack_function_name(name, param)] = pack
    return IRModule(functions)


def split_layout_free(func: PrimFunc) -> tuple[PrimFunc, dict[str, PrimFunc]]:
    """``func`` without the conversions of the parameters it marks constant (``func``
    itself when it has none), and the function that converts each, by parameter."""
    packs = {}
    for param in layout_free_params(func):
        if _conversion(func, param.name) is not None:
            func, packs[param.name] = split_conversion(func, param.name)
    return func, packs


def pack_function_name(func_name: str, param: str) -> str:
    """The name of the function that converts ``param`` of ``func_name``."""
    return f"{func_name}{PACK_SUFFIX}{param}"


def pack_functions(names: Iterable[str], func_name: str) -> dict[str, str]:
    """Among the function names ``names``, those that convert a parameter of
    ``func_name``: parameter name -> converting function's name."""
    prefix = f"{func_name}{PACK_SUFFIX}"
    return {name[len(prefix) :]: name for name in names if name.startswith(prefix)}


def split_conversion(func: PrimFunc, param: str) -> tuple[PrimFunc, PrimFunc]:
    """(``func`` taking ``param`` in its new layout, the function that converts it)."""
    found = _conversion(func, param)
    if found is None:
        raise PrepackError(f"prepack: the function has no top-level conversion of {param!r}")
    statement, block = found
    source = next(p for p in func.params if p.name == param)
    laid_out = _written(block)
    if len(readers(func, source)) != 1 or len(writers(func, laid_out)) != 1:
        raise PrepackError(
            f"prepack: {param!r} or its converted copy {laid_out.name!r} is used by more "
            "blocks than the conversion; the function must read the weight only through it"
        )
    root = func.root_block
    rest = [s for s in scope_children(root) if s is not statement]
    allocs = tuple(b for b in root.alloc_buffers if b is not laid_out)
    new_root = dataclasses.replace(root, body=seq(*rest), alloc_buffers=allocs)
    assert isinstance(func.body, BlockRealize)
    params = tuple(laid_out if p is source else p for p in func.params)
    main = dataclasses.replace(
        func, params=params, body=dataclasses.replace(func.body, block=new_root)
    )
    pack_root = Block("root", (), statement)
    pack = PrimFunc(
        (source, laid_out),
        BlockRealize((), true_predicate(), pack_root),
        {CONVERTS_WEIGHT_ATTR: True},
    )
    return main, pack


def _conversion(func: PrimFunc, param: str) -> tuple[Stmt, Block] | None:
    """The top-level statement of ``func`` that only converts ``param``, and its block."""
    for statement in scope_children(func.root_block):
        realizes = leaf_realizes(statement)
        if len(realizes) == 1 and _converted(func, realizes[0].block) == param:
            return statement, realizes[0].block
    return None


def _converted(func: PrimFunc, block: Block) -> str | None:
    """The parameter a conversion block converts: the one its annotation names, or,
    annotated True, the one parameter it reads (a workload's own transform, such as
    Winograd's, which must not depend on what the caller named its weight)."""
    mark = block.annotations.get(LAYOUT_REWRITE_ATTR)
    if mark is True:
        params = {id(p) for p in func.params}
        read = [b.name for b in reads_of(block) if id(b) in params]
        return read[0] if len(read) == 1 else None
    return mark if isinstance(mark, str) else None


def _convertible(functions: dict[str, PrimFunc]) -> list[str]:
    names = {
        name
        for func in functions.values()
        for realize in leaf_realizes(func.body)
        if (name := _converted(func, realize.block)) is not None
    }
    return sorted(names)


def _written(block: Block) -> Buffer:
    (buffer,) = writes_of(block)
    return buffer
