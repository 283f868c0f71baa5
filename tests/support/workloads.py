"""Small workloads that several schedule-primitive tests share, with fixed block
names (C for matmul; Y and C for matmul + relu; M, E, S, O for softmax)."""

import numpy as np

from compiler import te
from compiler.ir.function import PrimFunc


def matmul(m: int, n: int, k: int) -> PrimFunc:
    a = te.placeholder((m, k), name="A")
    b = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return te.create_prim_func([a, b, c])


def mm_relu(m: int, n: int, k: int) -> PrimFunc:
    a = te.placeholder((m, k), name="A")
    b = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), name="k")
    y = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="Y")
    c = te.compute((m, n), lambda i, j: te.max(y[i, j], 0.0), name="C")
    return te.create_prim_func([a, b, c])


def softmax(m: int, n: int) -> PrimFunc:
    a = te.placeholder((m, n), name="A")
    j = te.reduce_axis((0, n), name="j")
    mx = te.compute((m,), lambda i: te.max(a[i, j], axis=j), name="M")
    e = te.compute((m, n), lambda i, jj: te.exp(a[i, jj] - mx[i]), name="E")
    j2 = te.reduce_axis((0, n), name="j2")
    s = te.compute((m,), lambda i: te.sum(e[i, j2], axis=j2), name="S")
    o = te.compute((m, n), lambda i, jj: e[i, jj] / s[i], name="O")
    return te.create_prim_func([a, o])


def softmax_ref(a: np.ndarray) -> np.ndarray:
    e = np.exp(a - a.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)
