"""``compiler.build``: lower, generate LLVM code, compile and load, in one call."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

from compiler.abi.signature import FuncSignature
from compiler.codegen.llvm_build import compile_ir, jit_load
from compiler.codegen.llvm_module import emit_module
from compiler.cuda_build import build_cuda_binary
from compiler.lower.ir_dump import IRDump
from compiler.lower.pipeline import lower_func, to_ir_module
from compiler.lower.prepack import prepack as prepack_module
from compiler.lower.prepack import prepack_layout_free
from compiler.runtime.cuda_module import CudaModule
from compiler.runtime.gpu_binary import GPUBinary
from compiler.runtime.module import Function, Module
from compiler.schedule.default import apply_default_schedule
from compiler.schedule.default_gpu import apply_gpu_default_schedule
from compiler.target.cuda import CudaTarget
from compiler.target.llvm import LLVMTarget, target_machine, unrunnable_here
from compiler.target.parse import Target, parse_target
from compiler.tuned.lookup import TuningLookup, apply_best
from compiler.tuned.replay import REPLAYS

SYMBOL_PREFIX = "tensortune_"

logger = logging.getLogger(__name__)


def build(
    obj: Any,
    args: Sequence[Any] | None = None,
    target: str | Target = "llvm",
    name: str = "main",
    *,
    database: TuningLookup | None = None,
    default_schedule: bool = True,
    dump_ir: str | os.PathLike[str] | None = None,
    prepack: Sequence[str] = (),
) -> Module | CudaModule:
    """Compile ``obj`` for a CPU and load it into this process, or for a GPU
    (``target="cuda -arch=sm_80"``) and load it onto the first device; see
    ``build_cuda`` for the GPU build alone, which needs no device.

    ``obj`` is an IRModule, a PrimFunc (named by its ``global_symbol``), a Schedule
    (its ``.mod``) or a TE-style schedule (``build(s, [A, B, C])``). ``target`` is
    ``"llvm"`` for this machine or e.g. ``"llvm -mcpu=znver3 -num-cores=2"``.

    With ``database`` (anything with ``best_trace``, such as ``db.Database``), each
    function that has a stored best schedule for this target is replaced by that
    schedule replayed on it; an INFO log line (logger ``compiler.build``) says which
    functions were tuned and which were not (``compiler.tuned.lookup.apply_best``
    gives the same report as a value).

    A function that comes with no schedule (see ``compiler.schedule.default``) gets
    the default one: parallel outer loops, vectorized inner loops. Pass
    ``default_schedule=False`` to compile the loops exactly as written.

    A parameter that a function marks constant (``compiler.ir.layout_free``) and
    whose layout its schedule rewrites (``transform_layout``) is converted by a
    function of its own, ``<function>__pack_<param>`` (parameters: the weight, the
    converted weight), to be called once per weight; the function then takes the
    converted weight (see ``compiler.lower.prepack``). ``prepack`` names more such
    parameters, for functions that do not mark them.

    ``dump_ir`` names a folder that gets the IR after every lowering pass, the LLVM IR
    before and after optimization, and the assembly, one numbered file each.
    """
    parsed = parse_target(target)
    if isinstance(parsed, CudaTarget):
        binary = build_cuda(
            obj, args, parsed, name, database=database, default_schedule=default_schedule
        )
        return CudaModule(binary)
    return build_llvm(
        obj,
        args,
        parsed,
        name,
        database=database,
        default_schedule=default_schedule,
        dump_ir=dump_ir,
        prepack=prepack,
    )


def build_llvm(
    obj: Any,
    args: Sequence[Any] | None = None,
    target: str | LLVMTarget = "llvm",
    name: str = "main",
    *,
    database: TuningLookup | None = None,
    default_schedule: bool = True,
    dump_ir: str | os.PathLike[str] | None = None,
    prepack: Sequence[str] = (),
) -> Module:
    """``build`` for a CPU target: the same arguments, a ``Module``."""
    llvm_target = LLVMTarget.parse(target)
    mod = to_ir_module(obj, args, name)
    if database is not None:
        mod, report = apply_best(mod, llvm_target, database)
        logger.info("%s", report)
    if prepack:
        mod = prepack_module(mod, prepack)
    if default_schedule:
        mod = apply_default_schedule(mod, target=llvm_target)
    mod = prepack_layout_free(mod)
    dump = IRDump(dump_ir) if dump_ir is not None else None
    if dump is None:
        lowered = {func_name: REPLAYS.lowered(func) for func_name, func in mod.items()}
    else:
        lowered = {
            func_name: lower_func(func, observe=dump.observer(func_name))
            for func_name, func in mod.items()
        }
    signatures = _signatures(mod)
    tm = target_machine(llvm_target)
    text = emit_module(
        lowered,
        signatures,
        llvm_target.num_cores,
        tm.triple,
        str(tm.target_data),
        llvm_target.vector_bits,
    )
    compiled = compile_ir(text, llvm_target)
    if dump is not None:
        dump.write("llvm", "ll", text)
        dump.write("llvm-optimized", "ll", compiled.llvm_ir())
        dump.write("assembly", "s", compiled.assembly())
    keepalive, addresses = jit_load(compiled.object_code, [s.symbol for s in signatures])
    unrunnable = unrunnable_here(llvm_target)
    functions = {
        s.name: Function(s, addresses[s.symbol], keepalive, unrunnable=unrunnable)
        for s in signatures
    }
    return Module(functions, source=compiled, object_code=compiled.object_code)


def build_cuda(
    obj: Any,
    args: Sequence[Any] | None = None,
    target: str | CudaTarget = "cuda -arch=sm_80",
    name: str = "main",
    *,
    database: TuningLookup | None = None,
    default_schedule: bool = True,
) -> GPUBinary:
    """Compile ``obj`` for a GPU into a ``GPUBinary`` (PTX, cubin, launch plan),
    without touching a device. Functions with no schedule get the default GPU one
    (``compiler.schedule.default_gpu``), those with a stored best schedule in
    ``database`` that one."""
    cuda = CudaTarget.parse(target)
    mod = to_ir_module(obj, args, name)
    if database is not None:
        mod, report = apply_best(mod, cuda, database)
        logger.info("%s", report)
    if default_schedule:
        mod = apply_gpu_default_schedule(mod, cuda)
    return build_cuda_binary(mod, cuda)


def _signatures(mod: Any) -> list[FuncSignature]:
    taken: set[str] = set()
    signatures = []
    for func_name, func in mod.items():
        base = SYMBOL_PREFIX + "".join(c if c.isalnum() else "_" for c in func_name)
        symbol, n = base, 1
        while symbol in taken:
            symbol, n = f"{base}_{n}", n + 1
        taken.add(symbol)
        signatures.append(FuncSignature.from_prim_func(func_name, symbol, func))
    return signatures
