"""Textual LLVM IR to optimized machine code, and machine code into this process.

The pipeline is: parse, verify, optimize with the new pass manager at O3 (loop
and SLP vectorization on), emit an object file with the target machine. The
same object bytes are what the JIT loads and what ``export_library`` links into a
shared library, so a loaded library runs exactly the code that was timed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import llvmlite.binding as llvm
from llvmlite.binding import ffi

from compiler.codegen.llvm_types import CodegenError
from compiler.target.llvm import LLVMTarget, init_llvm, target_machine


@dataclass(frozen=True)
class CompiledModule:
    """Optimized LLVM module and its object code for one target."""

    target: LLVMTarget
    object_code: bytes
    module: llvm.ModuleRef = field(repr=False)

    def llvm_ir(self) -> str:
        return str(self.module)

    def assembly(self) -> str:
        return target_machine(self.target).emit_assembly(self.module)


def compile_ir(text: str, target: LLVMTarget) -> CompiledModule:
    """Parse, optimize and emit ``text`` for ``target``."""
    tm = target_machine(target)
    module = parse_verified(text)
    optimize(module, tm)
    return CompiledModule(target, tm.emit_object(module), module)


def parse_verified(text: str) -> llvm.ModuleRef:
    """``text`` parsed and verified; CodegenError with the numbered text if invalid."""
    try:
        module = llvm.parse_assembly(text)
        module.verify()
    except RuntimeError as err:
        raise CodegenError(f"generated LLVM IR is invalid: {err}\n{_numbered(text)}") from err
    return module


def optimize(module: llvm.ModuleRef, tm: llvm.TargetMachine) -> None:
    """The O3 pipeline. A pass builder and its pass manager serve one run only: a run
    registers callbacks in the builder that point into that run's stack frame."""
    tuning = llvm.create_pipeline_tuning_options(speed_level=3)
    tuning.loop_vectorization = True
    tuning.slp_vectorization = True
    tuning.loop_unrolling = True
    builder = llvm.create_pass_builder(tm, tuning)
    manager = builder.getModulePassManager()
    try:
        manager.run(module, builder)
    finally:
        _dispose_pass_manager(manager)


def _dispose_pass_manager(manager: llvm.ModulePassManager) -> None:
    """llvmlite 0.50's ModulePassManager never frees its LLVM object (about 28 KB, and
    with the analyses it keeps, 75 KB per build); a tuner building thousands of kernels
    cannot afford that. Free it here unless llvmlite learned to do so itself."""
    if type(manager)._dispose is ffi.ObjectRef._dispose:
        ffi.lib.LLVMPY_DisposeNewModulePassManger(manager)
        manager.detach()


def _numbered(text: str) -> str:
    return "\n".join(f"{n:5d}  {line}" for n, line in enumerate(text.splitlines(), 1))


def jit_load(object_code: bytes, symbols: list[str]) -> tuple[object, dict[str, int]]:
    """Load ``object_code`` into this process. Returns a keep-alive handle (the code
    is freed when it is garbage collected) and the address of each symbol.

    Each load gets its own MCJIT engine: freeing an engine frees everything it
    loaded, where an LLJIT keeps a few KB per library for the life of the process.
    Undefined symbols (libgomp, libm) resolve against the process.
    """
    init_llvm()
    host = llvm.Target.from_default_triple().create_target_machine()
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), host)
    engine.add_object_file(llvm.ObjectFileRef.from_data(object_code))
    engine.finalize_object()
    addresses = {symbol: engine.get_function_address(symbol) for symbol in symbols}
    missing = [symbol for symbol, address in addresses.items() if not address]
    if missing:
        raise CodegenError(f"the object code defines no symbols {missing}")
    return engine, addresses
