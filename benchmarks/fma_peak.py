"""The float32 FMA throughput of this machine's cores, measured: a loop of
independent vector FMAs, timed on one core.

The nominal peak (cores x 2 FMA pipes x lanes x 2 FLOPs x the clock ``/proc/cpuinfo``
reports) takes the base clock. A cloud host's cores run faster than that under turbo:
on a 2-vCPU Xeon whose ``/proc/cpuinfo`` says 2.6 GHz (333 GFLOP/s nominal), tuned
GEMM 1024^3 kernels ran at 372-386 GFLOP/s, so a fraction of the nominal peak
overstated every kernel's efficiency. The loop below is the ceiling a kernel can
reach: ACCUMULATORS chains of fused multiply-adds, enough to cover the FMA latency
on both pipes, with no memory traffic, timed on one core and counted for every core.

    python benchmarks/fma_peak.py      # the measured peak beside the nominal one
"""

from __future__ import annotations

import ctypes
import os
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or os.curdir) == _HERE:
    del sys.path[0]  # run as a script, this file would shadow the packages it measures

from compiler.codegen.llvm_build import compile_ir, jit_load  # noqa: E402
from compiler.codegen.llvm_context import kernel_attributes  # noqa: E402
from compiler.target.llvm import LLVMTarget  # noqa: E402

# Independent FMA chains per core: at least latency (4 cycles) x pipes (2), and with
# the two constant operands within the 16 (AVX2) or 32 (AVX-512) vector registers.
ACCUMULATORS = 12
# Loop iterations per call: about 0.1 s at 100 GFLOP/s a core with 16 lanes.
ITERATIONS = 20_000_000 // ACCUMULATORS
# Timed calls per core; the fastest counts (interference only slows a run).
REPEATS = 3
# The chains' constant operands: acc * SCALE + STEP stays finite however long it runs.
SCALE = 0.5
STEP = 1.0


def fma_loop_ir(lanes: int, vector_bits: int) -> str:
    """LLVM IR of ``float fma_loop(i64 n)``: ACCUMULATORS vectors of ``lanes`` floats,
    each ``n`` times replaced by ``acc * SCALE + STEP`` (``llvm.fma``), and the sum of
    their first lanes returned, so that no FMA is dead."""
    vec = f"<{lanes} x float>"
    fma = f"@llvm.fma.v{lanes}f32"
    scale = f"{vec} splat (float {SCALE:e})"
    step = f"{vec} splat (float {STEP:e})"
    lines = [
        f"declare {vec} {fma}({vec}, {vec}, {vec})",
        "",
        "define float @fma_loop(i64 %n) #0 {",
        "entry:",
        "  %empty = icmp sle i64 %n, 0",
        "  br i1 %empty, label %done, label %loop",
        "loop:",
        "  %i = phi i64 [ 0, %entry ], [ %next, %loop ]",
    ]
    lines += [
        f"  %acc{k} = phi {vec} [ zeroinitializer, %entry ], [ %fma{k}, %loop ]"
        for k in range(ACCUMULATORS)
    ]
    lines += [
        f"  %fma{k} = call {vec} {fma}({vec} %acc{k}, {scale}, {step})" for k in range(ACCUMULATORS)
    ]
    lines += [
        "  %next = add i64 %i, 1",
        "  %more = icmp slt i64 %next, %n",
        "  br i1 %more, label %loop, label %done",
        "done:",
    ]
    lines += [
        f"  %last{k} = phi {vec} [ zeroinitializer, %entry ], [ %fma{k}, %loop ]"
        for k in range(ACCUMULATORS)
    ]
    total = "0.0"
    for k in range(ACCUMULATORS):
        lines.append(f"  %lane{k} = extractelement {vec} %last{k}, i64 0")
        lines.append(f"  %sum{k} = fadd float {total}, %lane{k}")
        total = f"%sum{k}"
    lines += [f"  ret float {total}", "}", "", kernel_attributes(vector_bits), ""]
    return "\n".join(lines)


class FmaLoop:
    """``fma_loop_ir`` compiled for ``target`` (default: this host) as kernels are, and
    loaded into this process."""

    def __init__(self, target: LLVMTarget | None = None) -> None:
        self.target = target or LLVMTarget.parse("llvm")
        self.lanes = max(self.target.vector_bits // 32, 1)
        compiled = compile_ir(fma_loop_ir(self.lanes, self.target.vector_bits), self.target)
        self._keepalive, addresses = jit_load(compiled.object_code, ["fma_loop"])
        self._call = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64)(addresses["fma_loop"])

    def __call__(self, iterations: int) -> float:
        return float(self._call(iterations))

    def flops(self, iterations: int) -> int:
        """The floating-point operations of one call of ``iterations``."""
        return 2 * self.lanes * ACCUMULATORS * iterations


def measured_fma_peak_gflops() -> float:
    """GFLOP/s of every core of the target at the rate one core sustains running the FMA
    loop alone (the fastest of REPEATS calls). Not all cores at once: a cloud host
    lends a core to another guest now and then, and on a 2-vCPU Xeon two threads ran
    the loop at 342-455 GFLOP/s from one second to the next, while one ran it at
    221-237 GFLOP/s throughout."""
    loop = FmaLoop()
    loop(ITERATIONS // 10)  # warm up: the clock ramps up, the code is paged in
    seconds = float("inf")
    for _ in range(REPEATS):
        began = time.perf_counter()
        loop(ITERATIONS)
        seconds = min(seconds, time.perf_counter() - began)
    return loop.target.threads * loop.flops(ITERATIONS) / seconds / 1e9


def nominal_fma_peak_gflops() -> float | None:
    """The nominal peak: cores x 2 FMA pipes x lanes x 2 FLOPs x the clock
    ``/proc/cpuinfo`` reports (None where it reports none)."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            mhz = next(float(line.split(":")[1]) for line in cpuinfo if line.startswith("cpu MHz"))
    except (OSError, StopIteration, ValueError):
        return None
    target = LLVMTarget.parse("llvm")
    return target.threads * 2 * (target.vector_bits // 32) * 2 * mhz / 1e3


if __name__ == "__main__":
    nominal = nominal_fma_peak_gflops()
    measured = measured_fma_peak_gflops()
    shown = "unknown" if nominal is None else f"{nominal:.0f}"
    print(f"FMA peak: measured {measured:.0f} GFLOP/s, nominal {shown} GFLOP/s")
