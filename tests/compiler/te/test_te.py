"""The tensor-expression call forms TVM users paste, each checked for what it builds,
and the bad uses each refused with a clear TensorError or ValueError."""

from __future__ import annotations

import numpy as np
import pytest
from ir_interpreter import random_args, run_func

import compiler
from compiler import te
from compiler.ir import expr as E
from compiler.ir.stmt import IterKind, IterVar


def test_placeholder_forms() -> None:
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    assert A.shape[0] is n and A.dtype == "float32" and A.name == "A" and A.ndim == 1
    B = te.placeholder((128, 128), "float32", name="B")
    assert [int(d) for d in B.shape] == [128, 128]
    C = te.placeholder((3, 5), dtype="int32", name="C")
    assert C.dtype == "int32"
    assert te.placeholder(7, name="D").ndim == 1


def test_reduce_axis_forms() -> None:
    k = te.reduce_axis((0, 128), "k")
    assert isinstance(k, IterVar) and k.kind is IterKind.REDUCE
    assert k.var.name == "k" and int(k.dom.min) == 0 and int(k.dom.extent) == 128
    j = te.reduce_axis((2, 9), "j")
    assert str(j.dom.min) == "2" and str(j.dom.extent) == "7"


def test_elementwise_compute_with_symbolic_size() -> None:
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    assert C.shape[0] is n and C.op.axis[0].var.name == "i"
    func = te.create_prim_func([A, B, C])
    a, b, c = (np.random.default_rng(1).standard_normal(9).astype("float32") for _ in range(3))
    run_func(func, a, b, c)
    np.testing.assert_allclose(c, a + b, rtol=1e-6)


def mm_relu_tutorial() -> tuple[te.Tensor, te.Tensor, te.Tensor, te.Tensor]:
    """TVM's TensorIR tutorial, verbatim but for the sizes."""
    A = te.placeholder((13, 11), "float32", name="A")
    B = te.placeholder((11, 7), "float32", name="B")
    k = te.reduce_axis((0, 11), "k")
    Y = te.compute((13, 7), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="Y")
    C = te.compute((13, 7), lambda i, j: te.max(Y[i, j], 0), name="C")
    return A, B, Y, C


def test_mm_relu_tutorial_flow() -> None:
    A, B, Y, C = mm_relu_tutorial()
    assert C.op.axis[0].var.name == "i" and len(Y.op.reduce_axis) == 1
    assert C.op.body.dtype == "float32"  # the Python 0 became a float32 constant
    func = te.create_prim_func([A, B, C]).with_attr("global_symbol", "mm_relu")
    mod = compiler.IRModule({"mm_relu": func})
    assert mod["mm_relu"] is func and list(mod) == ["mm_relu"]
    assert "def mm_relu(" in mod.script()
    a, b, c = random_args(func)
    run_func(mod, a, b, c)
    np.testing.assert_allclose(c, np.maximum(a @ b, 0), rtol=1e-5, atol=1e-6)
    with pytest.raises(KeyError, match="mm_relu"):
        mod["main"]


def test_star_args_compute_and_call_syntax() -> None:
    A, B, _Y, C = mm_relu_tutorial()
    D = te.compute(C.shape, lambda *i: te.max(C(*i), 0), name="D")
    assert [iv.var.name for iv in D.op.axis] == ["i0", "i1"]
    E2 = te.compute(C.shape, lambda i, j: te.min(C(i, j), C[i, j] * 0.5), name="E")
    func = te.create_prim_func([A, B, D, E2])
    a, b, d, e = random_args(func)
    run_func(func, a, b, d, e)
    relu = np.maximum(a @ b, 0)
    np.testing.assert_allclose(d, relu, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(e, np.minimum(relu, relu * 0.5), rtol=1e-5, atol=1e-6)


def test_scalar_promotion_keeps_the_tensor_dtype() -> None:
    A = te.placeholder((4,), "float16", name="A")
    assert te.max(A[0], 0).dtype == "float16"
    assert (A[0] + 1).dtype == "float16"
    I = te.placeholder((4,), "int32", name="I")  # noqa: E741 - TVM-style name
    assert te.max(I[0], 0).dtype == "int32"
    assert (I[0] * 0.5).dtype == "float32"


def test_reductions_max_min_and_where() -> None:
    A = te.placeholder((6, 5), name="A")
    k = te.reduce_axis((0, 5), "k")
    M = te.compute((6,), lambda i: te.max(A[i, k], axis=k), name="M")
    k2 = te.reduce_axis((0, 5), "k2")
    S = te.compute((6,), lambda i: te.sum(A[i, k2], axis=k2, where=k2 > 1), name="S")
    k3 = te.reduce_axis((1, 4), "k3")
    P = te.compute((6,), lambda i: te.min(A[i, k3], axis=k3), name="P")
    func = te.create_prim_func([A, M, S, P])
    a, m, s, p = random_args(func)
    run_func(func, a, m, s, p)
    np.testing.assert_allclose(m, a.max(axis=1), rtol=1e-6)
    np.testing.assert_allclose(s, a[:, 2:].sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(p, a[:, 1:4].min(axis=1), rtol=1e-6)


def test_intrinsics_and_if_then_else() -> None:
    A = te.placeholder((7,), name="A")
    B = te.compute(
        (7,), lambda i: te.if_then_else(i > 2, te.exp(A[i]), te.sqrt(te.abs(A[i]))), name="B"
    )
    func = te.create_prim_func([A, B])
    a, b = random_args(func)
    run_func(func, a, b)
    idx = np.arange(7)
    np.testing.assert_allclose(b, np.where(idx > 2, np.exp(a), np.sqrt(np.abs(a))), rtol=1e-5)


# bad uses ---------------------------------------------------------------------------


def test_wrong_number_of_indices() -> None:
    A = te.placeholder((4, 4), name="A")
    with pytest.raises(te.TensorError, match="'A' has 2 dimensions but was indexed with 1"):
        te.compute((4,), lambda i: A[i], name="B")
    with pytest.raises(te.TensorError, match="3 indices"):
        A(1, 2, 3)


def test_compute_function_arity() -> None:
    with pytest.raises(te.TensorError, match="takes 1 arguments but the shape has 2"):
        te.compute((4, 4), lambda i: i * 1.0)


def test_reduction_not_at_top_level() -> None:
    A = te.placeholder((4, 4), name="A")
    k = te.reduce_axis((0, 4), "k")
    with pytest.raises(te.TensorError, match="must be the whole body"):
        te.compute((4,), lambda i: te.sum(A[i, k], axis=k) + 1, name="B")


def test_reduction_needs_an_axis() -> None:
    A = te.placeholder((4,), name="A")
    with pytest.raises(te.TensorError, match="axis="):
        te.sum(A[0])
    i = te.var("i")
    with pytest.raises(te.TensorError, match=r"not a te\.reduce_axis"):
        te.sum(A[0], axis=[IterVar(i, E.Range.from_min_extent(0, 4))])


def test_placeholder_missing_from_the_args() -> None:
    A, _B, _, C = mm_relu_tutorial()
    with pytest.raises(te.TensorError, match="placeholder 'B' is read but not among the arguments"):
        te.create_prim_func([A, C])


def test_non_positive_dimension() -> None:
    with pytest.raises(te.TensorError, match="dimension 0 must be positive"):
        te.placeholder((4, 0), name="A")
    with pytest.raises(te.TensorError, match="dimension -3 must be positive"):
        te.compute((-3,), lambda i: i * 1.0)
    with pytest.raises(te.TensorError, match="not an integer type"):
        te.placeholder((te.var("x", "float32"),), name="A")


def test_unknown_dtype() -> None:
    with pytest.raises(ValueError, match="unknown dtype 'float128'; expected one of"):
        te.placeholder((4,), "float128", name="A")
    with pytest.raises(ValueError, match="unknown dtype"):
        te.var("n", "index")
    A = te.placeholder((4,), name="A")
    with pytest.raises(ValueError, match="unknown dtype"):
        te.compute((4,), lambda i: A[i].astype("f32"))


def test_create_prim_func_takes_tensors() -> None:
    A = te.placeholder((4,), name="A")
    with pytest.raises(te.TensorError, match="takes tensors"):
        te.create_prim_func([A, "B"])  # type: ignore[list-item]


def test_symbolic_expression_is_not_a_python_bool() -> None:
    i = te.var("i")
    with pytest.raises(TypeError, match=r"te\.if_then_else"):
        te.compute((4,), lambda j: 1.0 if j > 2 else 0.0)
    with pytest.raises(TypeError):
        bool(i < 3)


def test_variable_outside_the_reduction_axes() -> None:
    A = te.placeholder((4, 4), name="A")
    k = te.reduce_axis((0, 4), "k")
    other = te.reduce_axis((0, 4), "other")
    B = te.compute((4,), lambda i: te.sum(A[i, k], axis=other), name="B")
    with pytest.raises(te.TensorError, match="'B' uses the variable 'k'"):
        te.create_prim_func([A, B])
    m = te.var("m")
    C = te.compute((4,), lambda i: A[i, 0] * m, name="C")
    with pytest.raises(te.TensorError, match="variable 'm'"):
        te.create_prim_func([A, C])
