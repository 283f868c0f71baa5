"""The TensorIR walkthrough: matmul + relu, transformed step by step.

    python examples/mm_relu.py

Follows TVM's "TensorIR: tensor program abstraction" tutorial: build the
workload from tensor expressions, split and reorder the matmul loops, move the
relu under the matmul's outer loop, split the reduction's init out, and compare
the time before and after. Every result is checked against numpy.
"""

import numpy as np

import compiler
from compiler import te

M = N = K = 128


def mm_relu_module() -> compiler.IRModule:
    A = te.placeholder((M, K), "float32", name="A")
    B = te.placeholder((K, N), "float32", name="B")
    k = te.reduce_axis((0, K), "k")
    Y = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="Y")
    C = te.compute((M, N), lambda i, j: te.max(Y[i, j], 0), name="C")
    func = te.create_prim_func([A, B, C]).with_attr("global_symbol", "mm_relu")
    return compiler.IRModule({"mm_relu": func})


def timed(mod: compiler.IRModule, a: np.ndarray, b: np.ndarray, expected: np.ndarray) -> float:
    lib = compiler.build(mod, target="llvm", default_schedule=False)
    c = np.empty((M, N), dtype="float32")
    lib["mm_relu"](a, b, c)
    np.testing.assert_allclose(c, expected, rtol=1e-5, atol=1e-4)
    return lib.time_evaluator("mm_relu", number=10)(a, b, c).mean


def main() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype("float32")
    b = rng.standard_normal((K, N)).astype("float32")
    expected = np.maximum(a @ b, 0)

    mod = mm_relu_module()
    print("# the workload")
    print(mod.script())
    before = timed(mod, a, b, expected)

    sch = compiler.Schedule(mod)
    block_Y = sch.get_block("Y", func_name="mm_relu")
    _i, j, k = sch.get_loops(block_Y)
    j0, j1 = sch.split(j, factors=[None, 4])
    sch.reorder(j0, k, j1)
    print("# after split and reorder")
    print(sch.mod.script())

    block_C = sch.get_block("C", "mm_relu")
    sch.reverse_compute_at(block_C, j0)
    print("# after reverse_compute_at")
    print(sch.mod.script())

    sch.decompose_reduction(block_Y, k)
    sch.vectorize(j1)
    print("# after decompose_reduction and vectorize")
    print(sch.mod.script())
    print("# the trace")
    print(sch.trace)

    after = timed(sch.mod, a, b, expected)
    print(f"time before: {before * 1e6:9.1f} us")
    print(f"time after:  {after * 1e6:9.1f} us  ({before / after:.1f}x faster)")


if __name__ == "__main__":
    main()
