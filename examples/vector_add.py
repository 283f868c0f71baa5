"""Vector add, TVM's first tutorial: a symbolic length, a TE-style schedule, a build.

    python examples/vector_add.py

Shows the lowered loops before and after splitting, parallelizing and
vectorizing (with the guard a non-dividing split needs), then builds, checks
against numpy at several lengths, times, and exports a shared library that
loads back.
"""

import os
import tempfile

import numpy as np

import compiler
from compiler import te


def main() -> None:
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")

    s = te.create_schedule(C.op)
    print("# unscheduled")
    print(compiler.lower(s, [A, B, C], simple_mode=True))

    outer, inner = s[C].split(C.op.axis[0], factor=64)
    s[C].parallel(outer)
    s[C].vectorize(inner)
    print("# split by 64, outer loop parallel, inner loop vectorized")
    print(compiler.lower(s, [A, B, C], simple_mode=True))

    lib = compiler.build(s, [A, B, C], target="llvm", name="vector_add")
    rng = np.random.default_rng(0)
    for length in (1, 63, 64, 1000, 1 << 20):
        a = rng.random(length, dtype=np.float32)
        b = rng.random(length, dtype=np.float32)
        c = np.empty(length, dtype=np.float32)
        lib["vector_add"](a, b, c)
        np.testing.assert_allclose(c, a + b)
    seconds = lib.time_evaluator("vector_add", number=100)(a, b, c).mean
    print(f"n = {length}: {seconds * 1e6:.1f} us, {3 * 4 * length / seconds / 1e9:.1f} GB/s")

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "vector_add.so")
        lib.export_library(path)
        loaded = compiler.load_module(path)
        loaded["vector_add"](a, b, c)
        np.testing.assert_allclose(c, a + b)
        print(f"exported to a shared library and loaded it back: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
