"""Small CUDA kernels written in LLVM IR, made into PTX by llvmlite's NVPTX back end
and into GPUBinaries by nvJitLink, for the tests of the GPU runtime and workers,
independent of the GPU lowering.

Every kernel works on BLOCK float32 elements per block of BLOCK threads. ``reverse``
uses shared memory and a barrier: each block writes its chunk of A, reversed and
doubled, to B, which is what the TE workload ``reverse_workload`` computes. The
others compute something else, fault or never end, on purpose.
"""

from __future__ import annotations

import functools

import llvmlite.binding as llvm

from compiler import te
from compiler.codegen.ptx_link import link_ptx
from compiler.ir import PrimFunc
from compiler.runtime.gpu_binary import BufferSpec, GPUBinary, GPUFunction, KernelLaunch
from compiler.target.cuda import CudaTarget

BLOCK = 256
BLOCKS = 4
N = BLOCK * BLOCKS
GRID = (BLOCKS, 1, 1)
THREADS = (BLOCK, 1, 1)
VECTOR = (N,)

_HEADER = """
target triple = "nvptx64-nvidia-cuda"
@sh = internal addrspace(3) global [256 x float] undef, align 4
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare void @llvm.nvvm.barrier0()
"""

# The element this thread owns (%g, %gi) and its thread index (%t, %ti).
_INDEX = """
  %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %b = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %base = mul i32 %b, 256
  %g = add i32 %base, %t
  %gi = zext i32 %g to i64
  %ti = zext i32 %t to i64
"""

KERNELS = {
    # B[g] = 2 * A[block * 256 + 255 - t], through shared memory.
    "reverse": """
define ptx_kernel void @reverse(ptr addrspace(1) %a, ptr addrspace(1) %out) {
entry:"""
    + _INDEX
    + """
  %pa = getelementptr float, ptr addrspace(1) %a, i64 %gi
  %v = load float, ptr addrspace(1) %pa
  %s = getelementptr [256 x float], ptr addrspace(3) @sh, i64 0, i64 %ti
  store float %v, ptr addrspace(3) %s
  call void @llvm.nvvm.barrier0()
  %r = sub i64 255, %ti
  %s2 = getelementptr [256 x float], ptr addrspace(3) @sh, i64 0, i64 %r
  %w = load float, ptr addrspace(3) %s2
  %w2 = fmul float %w, 2.0
  %po = getelementptr float, ptr addrspace(1) %out, i64 %gi
  store float %w2, ptr addrspace(1) %po
  ret void
}
""",
    # B[g] = 2 * A[g]: the right shape, the wrong values for ``reverse_workload``.
    "double": """
define ptx_kernel void @double(ptr addrspace(1) %a, ptr addrspace(1) %out) {
entry:"""
    + _INDEX
    + """
  %pa = getelementptr float, ptr addrspace(1) %a, i64 %gi
  %v = load float, ptr addrspace(1) %pa
  %d = fmul float %v, 2.0
  %po = getelementptr float, ptr addrspace(1) %out, i64 %gi
  store float %d, ptr addrspace(1) %po
  ret void
}
""",
    # C[g] = A[g] + B[g].
    "add": """
define ptx_kernel void @add(ptr addrspace(1) %a, ptr addrspace(1) %b2, ptr addrspace(1) %out) {
entry:"""
    + _INDEX
    + """
  %pa = getelementptr float, ptr addrspace(1) %a, i64 %gi
  %pb = getelementptr float, ptr addrspace(1) %b2, i64 %gi
  %va = load float, ptr addrspace(1) %pa
  %vb = load float, ptr addrspace(1) %pb
  %s = fadd float %va, %vb
  %po = getelementptr float, ptr addrspace(1) %out, i64 %gi
  store float %s, ptr addrspace(1) %po
  ret void
}
""",
    # Writes to address 16: an illegal address, which poisons the context.
    "fault": """
define ptx_kernel void @fault(ptr addrspace(1) %a, ptr addrspace(1) %out) {
entry:
  %p = inttoptr i64 16 to ptr addrspace(1)
  store volatile float 1.0, ptr addrspace(1) %p
  ret void
}
""",
    # Spins until A[0] holds a bit pattern random inputs never have.
    "hang": """
define ptx_kernel void @hang(ptr addrspace(1) %a, ptr addrspace(1) %out) {
entry:
  br label %spin
spin:
  %v = load volatile i32, ptr addrspace(1) %a
  %done = icmp eq i32 %v, 2139095041
  br i1 %done, label %exit, label %spin
exit:
  ret void
}
""",
}


def ptx(arch: str, names: tuple[str, ...] = tuple(KERNELS)) -> str:
    """PTX for ``arch`` holding the kernels ``names``."""
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    target = CudaTarget.parse(f"cuda -arch={arch}")
    module = llvm.parse_assembly(_HEADER + "".join(KERNELS[n] for n in names))
    module.verify()
    machine = llvm.Target.from_triple("nvptx64-nvidia-cuda").create_target_machine(
        cpu=arch, features=f"+ptx{target.ptx_version}", opt=3
    )
    return str(machine.emit_assembly(module))


def vector(name: str) -> BufferSpec:
    return BufferSpec(name, VECTOR, "float32")


def one_kernel(name: str, kernel: str) -> GPUFunction:
    """Function ``name``(A, B) that runs ``kernel`` on A and B."""
    launch = KernelLaunch(kernel, GRID, THREADS, (0, 1), 0)
    return GPUFunction(name, (vector("A"), vector("B")), (), (launch,))


def triple() -> GPUFunction:
    """``triple``(A, B): B = 3 A in two kernels through a workspace W = 2 A."""
    twice = KernelLaunch("double", GRID, THREADS, (0, 2), 0)
    plus = KernelLaunch("add", GRID, THREADS, (2, 0, 1), 0)
    return GPUFunction("triple", (vector("A"), vector("B")), (vector("W"),), (twice, plus))


@functools.cache
def binary(arch: str, entry: str = "reverse") -> GPUBinary:
    """Every kernel linked for ``arch``; function "main" runs kernel ``entry``, and
    "triple" is the two-kernel function of ``triple``."""
    text = ptx(arch)
    linked = link_ptx(text, arch)
    functions = (one_kernel("main", entry), triple())
    return GPUBinary(arch, text, linked.cubin, functions)


def reverse_workload() -> PrimFunc:
    """What ``reverse`` computes, as a workload: its reference for the runner."""
    a = te.placeholder(VECTOR, name="A")
    b = te.compute(
        VECTOR, lambda i: a[i // BLOCK * BLOCK + (BLOCK - 1) - i % BLOCK] * 2.0, name="B"
    )
    return te.create_prim_func([a, b])
