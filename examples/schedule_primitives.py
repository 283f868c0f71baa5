"""TVM's schedule-primitives tutorial: split, tile, fuse, reorder, compute_at,
compute_inline and compute_root, each shown on the lowered loops.

    python examples/schedule_primitives.py

Every schedule is built and checked against numpy.
"""

import numpy as np

import compiler
from compiler import te

M, N = 96, 80


def check(s: object, args: list, expected_fn) -> None:
    lib = compiler.build(s, args, target="llvm")
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal([int(d) for d in t.shape]).astype("float32") for t in args]
    lib(*arrays)
    np.testing.assert_allclose(arrays[-1], expected_fn(*arrays[:-1]), rtol=1e-5, atol=1e-5)


def show(title: str, s: object, args: list) -> None:
    print(f"# {title}")
    print(compiler.lower(s, args, simple_mode=True))


def elementwise():
    A = te.placeholder((M, N), name="A")
    B = te.compute((M, N), lambda i, j: A[i, j] * 2, name="B")
    return A, B


def main() -> None:
    A, B = elementwise()
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=32)
    show("split by factor 32 (96 = 3 x 32)", s, [A, B])
    check(s, [A, B], lambda a: a * 2)

    A, B = elementwise()
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[1], nparts=3)
    show("split into 3 parts (80 = 3 x 27, guarded)", s, [A, B])
    check(s, [A, B], lambda a: a * 2)

    A, B = elementwise()
    s = te.create_schedule(B.op)
    xo, yo, xi, yi = s[B].tile(B.op.axis[0], B.op.axis[1], x_factor=10, y_factor=5)
    show("tile 10 x 5", s, [A, B])
    check(s, [A, B], lambda a: a * 2)

    A, B = elementwise()
    s = te.create_schedule(B.op)
    xo, yo, xi, yi = s[B].tile(B.op.axis[0], B.op.axis[1], x_factor=10, y_factor=5)
    s[B].fuse(xi, yi)
    show("tile, then fuse the inner tile loops", s, [A, B])
    check(s, [A, B], lambda a: a * 2)

    A, B = elementwise()
    s = te.create_schedule(B.op)
    xo, yo, xi, yi = s[B].tile(B.op.axis[0], B.op.axis[1], x_factor=10, y_factor=5)
    s[B].reorder(xi, yo, xo, yi)
    show("tile, then reorder to xi, yo, xo, yi", s, [A, B])
    check(s, [A, B], lambda a: a * 2)

    def chain():
        A = te.placeholder((M,), name="A")
        B = te.compute((M,), lambda i: A[i] + 1, name="B")
        C = te.compute((M,), lambda i: B[i] * 2, name="C")
        return A, B, C

    A, B, C = chain()
    s = te.create_schedule(C.op)
    show("B = A + 1, C = B * 2: two loops", s, [A, C])
    s[B].compute_at(s[C], C.op.axis[0])
    show("compute_at: B moves into C's loop", s, [A, C])
    check(s, [A, C], lambda a: (a + 1) * 2)

    A, B, C = chain()
    s = te.create_schedule(C.op)
    s[B].compute_inline()
    show("compute_inline: B disappears into C", s, [A, C])
    check(s, [A, C], lambda a: (a + 1) * 2)

    A, B, C = chain()
    s = te.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    s[B].compute_root()
    show("compute_root: B back at the root", s, [A, C])
    check(s, [A, C], lambda a: (a + 1) * 2)


if __name__ == "__main__":
    main()
