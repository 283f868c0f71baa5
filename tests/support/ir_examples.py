"""IR examples shared by the structural-equality, printer and serialisation tests: the
TVM tutorial's mm_relu, and random expression recipes that build equal trees twice."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from compiler import te
from compiler.ir import expr as E
from compiler.ir.function import PrimFunc


def mm_relu(
    n: int | None = 128,
    dtype: str = "float32",
    relu_floor: float = 0.0,
    names: tuple[str, str, str] = ("A", "B", "C"),
    renamed_indices: bool = False,
) -> PrimFunc:
    """The TVM tutorial's mm_relu; ``n=None`` makes the row count symbolic."""
    rows: Any = te.var("n") if n is None else n
    a_name, b_name, c_name = names
    A = te.placeholder((rows, 96), dtype, name=a_name)
    B = te.placeholder((96, 80), dtype, name=b_name)
    k = te.reduce_axis((0, 96), "k")
    if renamed_indices:
        Y = te.compute((rows, 80), lambda r, c: te.sum(A[r, k] * B[k, c], axis=k), name="Y")
    else:
        Y = te.compute((rows, 80), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="Y")
    C = te.compute((rows, 80), lambda x, y: te.max(Y[x, y], relu_floor), name=c_name)
    return te.create_prim_func([A, B, C]).with_attr("global_symbol", "mm_relu")


# Random expressions: a recipe is a nested tuple; building it twice gives equal trees.
_LEAVES = st.one_of(
    st.tuples(st.just("var"), st.integers(0, 2)),
    st.tuples(st.just("int"), st.integers(-3, 3)),
    st.tuples(st.just("float"), st.sampled_from([0.5, 1.0, 2.25, -1.5])),
)
_OPS = ("add", "sub", "mul", "max", "min", "lt", "select")
RECIPES = st.recursive(
    _LEAVES,
    lambda inner: st.tuples(st.sampled_from(_OPS), inner, inner),
    max_leaves=12,
)


def build(recipe: tuple[Any, ...], variables: list[E.Var]) -> E.PrimExpr:
    kind = recipe[0]
    if kind == "var":
        return variables[recipe[1]]
    if kind == "int":
        return E.const(recipe[1])
    if kind == "float":
        return E.const(recipe[1])
    a, b = build(recipe[1], variables), build(recipe[2], variables)
    if kind == "select":
        return te.if_then_else(a < b, a, b)
    if kind == "lt":
        return te.if_then_else(a < b, 1, 0)
    if kind in ("max", "min"):
        return getattr(te, kind)(a, b)
    return {"add": a + b, "sub": a - b, "mul": a * b}[kind]
