"""Building for a CUDA target: scheduled functions to PTX, PTX to a cubin, and the
launch plan of each function, as a ``GPUBinary`` (plain data a GPU host loads).

Everything here runs without a GPU: LLVM's NVPTX back end writes the PTX and the
CUDA JIT linker (nvJitLink, a library of its own) assembles it, so a machine
without a device builds, checks and ships what a GPU host runs. The linker's
report of registers per thread is checked against the target's registers per
block, which verification before code generation cannot know.
"""

from __future__ import annotations

import functools

import llvmlite.binding as llvm

from compiler.codegen.llvm_build import optimize, parse_verified
from compiler.codegen.nvptx_module import NVPTX_TRIPLE, emit_kernels
from compiler.codegen.ptx_link import link_ptx
from compiler.ir.buffer import Buffer
from compiler.ir.expr import IntImm, byte_size
from compiler.ir.function import IRModule
from compiler.lower.gpu_kernels import GPUProgram, Kernel, lower_gpu
from compiler.runtime.gpu_binary import BufferSpec, GPUBinary, GPUFunction, KernelLaunch
from compiler.schedule.errors import ScheduleError
from compiler.target.cuda import CudaTarget

SYMBOL_PREFIX = "tensortune_"


def build_cuda_binary(mod: IRModule, target: str | CudaTarget) -> GPUBinary:
    """Lower, generate and link every function of ``mod`` (already scheduled) for
    ``target``. Raises ScheduleError for a schedule the GPU cannot run as written or
    that exceeds the target's limits, CodegenError where code generation fails."""
    cuda = CudaTarget.parse(target)
    programs = {name: lower_gpu(func, name, cuda.capabilities) for name, func in mod.items()}
    symbols: list[tuple[str, Kernel]] = []
    functions = []
    for name, program in programs.items():
        launches = []
        for index, kernel in enumerate(program.kernels):
            symbol = _symbol(name, index, len(program.kernels))
            symbols.append((symbol, kernel))
            launches.append(_launch(symbol, kernel, program))
        functions.append(
            GPUFunction(
                name,
                tuple(_spec(b) for b in program.params),
                tuple(_spec(b) for b in program.workspace),
                tuple(launches),
            )
        )
    ptx = emit_ptx(emit_kernels(symbols, str(_machine(cuda).target_data)), cuda)
    linked = link_ptx(ptx, cuda.arch)
    for symbol, kernel in symbols:
        usage = linked.usage.get(symbol)
        if usage is None:
            continue
        needed = usage.registers * kernel.block[0] * kernel.block[1] * kernel.block[2]
        if needed > cuda.capabilities.max_registers_per_block:
            raise ScheduleError(
                f"kernel {symbol} needs {usage.registers} registers per thread for "
                f"{needed // usage.registers} threads, {needed} in all, more than the "
                f"target's {cuda.capabilities.max_registers_per_block} per block; use fewer "
                "threads or smaller tiles per thread"
            )
    return GPUBinary(cuda.arch, ptx, linked.cubin, tuple(functions))


def emit_ptx(text: str, target: CudaTarget) -> str:
    """Optimize textual NVPTX LLVM IR at O3 and write it as PTX."""
    machine = _machine(target)
    module = parse_verified(text)
    optimize(module, machine)
    return str(machine.emit_assembly(module))


@functools.cache
def _machine(target: CudaTarget) -> llvm.TargetMachine:
    _init_nvptx()
    return llvm.Target.from_triple(NVPTX_TRIPLE).create_target_machine(
        cpu=target.arch, features=f"+ptx{target.ptx_version}", opt=3
    )


@functools.cache
def _init_nvptx() -> None:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()


def _symbol(name: str, index: int, count: int) -> str:
    base = SYMBOL_PREFIX + "".join(c if c.isalnum() else "_" for c in name)
    return base if count == 1 else f"{base}_kernel{index}"


def _launch(symbol: str, kernel: Kernel, program: GPUProgram) -> KernelLaunch:
    everything = (*program.params, *program.workspace)
    positions = tuple(
        next(k for k, b in enumerate(everything) if b is buffer) for buffer in kernel.buffers
    )
    return KernelLaunch(symbol, kernel.grid, kernel.block, positions, kernel.shared_bytes)


def _spec(buffer: Buffer) -> BufferSpec:
    shape = []
    for dim in buffer.shape:
        if not isinstance(dim, IntImm):
            raise ScheduleError(f"buffer {buffer.name!r} has the symbolic shape {buffer.shape}")
        shape.append(dim.value)
    byte_size(buffer.dtype)  # refuses a dtype the GPU code cannot hold
    return BufferSpec(buffer.name, tuple(shape), buffer.dtype)
