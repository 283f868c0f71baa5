"""The inline float32 exp (compiler/codegen/llvm_fastmath.py): within a few ulp of the
exact value, numpy's inf, 0, NaN and denormal results at the edges, the same bits
scalar and vectorized, and no libm call left in a vectorized loop."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import compiler
from compiler import te, topi
from compiler.runtime.module import Module
from compiler.schedule import Schedule

# The documented bound is 2e-7 (measured 8.4e-8 over [-87, 88]); below the normal
# range the result is a denormal, exact only to its spacing, 2**-149.
RELATIVE_TOLERANCE = 2e-7
SMALLEST_DENORMAL = float(np.finfo(np.float32).smallest_subnormal)
SIZE = 64

EDGES = np.array(
    [
        np.inf,
        -np.inf,
        np.nan,
        0.0,
        -0.0,
        1.0,
        -1.0,
        88.7,
        88.72283,  # the largest x whose exp is finite
        88.72284,
        89.5,
        -87.3,  # below about -87.34 the result is a denormal
        -100.0,
        -103.97,  # the last x whose exp rounds to the smallest denormal
        -103.98,
        -104.0,
        -1000.0,
        1e-8,
        -1e-8,
        1e-38,
        SMALLEST_DENORMAL,
        -SMALLEST_DENORMAL,
    ],
    np.float32,
)


def exp_func(dtype: str = "float32", op=te.exp):
    a = te.placeholder((SIZE,), dtype, name="A")
    return te.create_prim_func([a, te.compute((SIZE,), lambda i: op(a[i]), name="B")])


def vectorized_exp() -> Module:
    sch = Schedule(exp_func())
    (i,) = sch.get_loops(sch.get_block("B"))
    _, inner = sch.split(i, [None, 16])
    sch.vectorize(inner)
    return compiler.build(sch.mod, default_schedule=False)


@pytest.fixture(scope="module")
def scalar() -> Module:
    return compiler.build(exp_func(), default_schedule=False)


def run(lib: Module, x: np.ndarray) -> np.ndarray:
    padded = np.zeros(SIZE, x.dtype)
    padded[: x.size] = x
    out = np.full(SIZE, np.nan, x.dtype)
    lib(padded, out)
    return out[: x.size]


def assert_close_to_exact(x: np.ndarray, got: np.ndarray) -> None:
    with np.errstate(over="ignore"):
        exact = np.exp(x.astype(np.float64))
    finite = np.isfinite(got) & np.isfinite(exact)
    error = np.abs(got[finite] - exact[finite])
    bound = RELATIVE_TOLERANCE * exact[finite] + SMALLEST_DENORMAL
    assert np.all(error <= bound), x[finite][error > bound]


def assert_special_values_as_numpy(x: np.ndarray, got: np.ndarray) -> None:
    with np.errstate(over="ignore", under="ignore"):
        want = np.exp(x)
    special = ~np.isfinite(want) | (want == 0)
    np.testing.assert_array_equal(got[special], want[special])


def test_edges_as_numpy(scalar):
    got = run(scalar, EDGES)
    assert_close_to_exact(EDGES, got)
    assert_special_values_as_numpy(EDGES, got)
    assert got[EDGES == 0].tolist() == [1.0, 1.0]


def test_vectorized_gives_the_scalar_bits(scalar, rng):
    x = np.concatenate([EDGES, rng.uniform(-110, 95, SIZE - EDGES.size).astype(np.float32)])
    vectorized = vectorized_exp()
    np.testing.assert_array_equal(run(vectorized, x), run(scalar, x))
    assert "expf" not in vectorized.get_source("asm")
    assert "x float>" in vectorized.get_source("ll")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(width=32), min_size=1, max_size=SIZE))
def test_random_floats(scalar, values):
    x = np.array(values, np.float32)
    got = run(scalar, x)
    assert_close_to_exact(x, got)
    assert_special_values_as_numpy(x, got)


def test_dense_grid_with_the_default_schedule():
    n = 1 << 16
    a = te.placeholder((n,), "float32", name="A")
    lib = compiler.build(te.create_prim_func([a, topi.exp(a)]))
    x = np.linspace(-87, 88, n, dtype=np.float32)
    got = np.empty_like(x)
    lib(x, got)
    assert_close_to_exact(x, got)


def test_sigmoid_goes_through_the_fast_exp():
    lib = compiler.build(exp_func(op=te.sigmoid))
    x = np.concatenate([EDGES, np.linspace(-30, 30, SIZE - EDGES.size, dtype=np.float32)])
    got = run(lib, x)
    with np.errstate(over="ignore"):
        want = 1 / (1 + np.exp(-x))  # in float32: 0 once exp(-x) overflows, as ours
    np.testing.assert_allclose(got, want, rtol=5e-7, atol=SMALLEST_DENORMAL)
    assert "expf" not in lib.get_source("asm")


def test_float16_is_computed_in_float32(rng):
    lib = compiler.build(exp_func("float16"))
    x = rng.uniform(-17, 11, SIZE).astype(np.float16)
    want = np.exp(x.astype(np.float32)).astype(np.float16)
    tiny = np.finfo(np.float16).smallest_subnormal
    np.testing.assert_allclose(run(lib, x), want, rtol=1e-3, atol=tiny)


def test_float64_keeps_the_libm_exp(rng):
    lib = compiler.build(exp_func("float64"))
    x = rng.uniform(-700, 700, SIZE)
    np.testing.assert_allclose(run(lib, x), np.exp(x), rtol=1e-15)
