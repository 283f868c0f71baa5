"""LLVM code generation: every kind of computation, dtype and loop kind, run for real
and compared with numpy on random data."""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy_int_ops import NUMPY_INT_OPS

import compiler
from compiler import te
from compiler.codegen.llvm_context import ModuleContext
from compiler.codegen.llvm_expr import ExprEmitter
from compiler.ir import expr as E
from compiler.ir.buffer import Buffer
from compiler.ir.expr import Var
from compiler.ir.function import PrimFunc
from compiler.ir.node import Node, transform, visit
from compiler.ir.stmt import (
    Allocate,
    Block,
    BlockRealize,
    BufferStore,
    For,
    ForKind,
    seq,
    true_predicate,
)
from compiler.schedule.default import default_schedule
from compiler.target.errors import TargetError
from compiler.target.llvm import LLVMTarget
from compiler.topi.reference import conv2d_nchw_im2col

VECTOR_TYPE = re.compile(r"<\d+ x float>")
# Compiled, never run: the host may lack AVX-512.
AVX512 = "llvm -mcpu=znver4 -num-cores=2"


def with_loop_kinds(func: PrimFunc, kinds: dict[str, ForKind]) -> PrimFunc:
    """Set the kind of the loops named in ``kinds`` (by loop variable name)."""

    def change(n: Node) -> Node | None:
        if isinstance(n, For) and n.loop_var.name in kinds:
            return dataclasses.replace(n, kind=kinds[n.loop_var.name])
        return None

    return dataclasses.replace(func, body=transform(func.body, change))


def swap_loops(func: PrimFunc, outer: str, inner: str) -> PrimFunc:
    """Interchange two directly nested loops (block bindings refer to loop variables,
    so the program stays the same)."""

    def change(n: Node) -> Node | None:
        if isinstance(n, For) and n.loop_var.name == outer:
            assert isinstance(n.body, For) and n.body.loop_var.name == inner
            new_inner = dataclasses.replace(n, body=n.body.body)
            return dataclasses.replace(n.body, body=new_inner)
        return None

    return dataclasses.replace(func, body=transform(func.body, change))


def matmul(m: int, k: int, n: int, dtype: str = "float32") -> PrimFunc:
    a = te.placeholder((m, k), dtype, name="A")
    b = te.placeholder((k, n), dtype, name="B")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return te.create_prim_func([a, b, c])


def elementwise(n: int, fcompute, dtype: str = "float32", out_dtype: str | None = None):
    a = te.placeholder((n,), dtype, name="A")
    b = te.placeholder((n,), dtype, name="B")
    c = te.compute((n,), lambda i: fcompute(a[i], b[i]), name="C")
    if out_dtype is not None:
        assert c.dtype == out_dtype
    return te.create_prim_func([a, b, c])


def test_matmul_at_odd_shapes(rng):
    lib = compiler.build(matmul(37, 53, 29))
    a = rng.standard_normal((37, 53)).astype("float32")
    b = rng.standard_normal((53, 29)).astype("float32")
    c = np.full((37, 29), np.nan, "float32")
    lib(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    ("reducer", "reference"), [(te.sum, np.sum), (te.max, np.max), (te.min, np.min)]
)
@pytest.mark.parametrize("start", [0, 3])
def test_reductions(rng, reducer, reference, start):
    a = te.placeholder((13, 21), name="A")
    r = te.reduce_axis((start, 21), name="r")
    out = te.compute((13,), lambda i: reducer(a[i, r], axis=r), name="out")
    lib = compiler.build(te.create_prim_func([a, out]))
    x = rng.standard_normal((13, 21)).astype("float32")
    y = np.zeros(13, "float32")
    lib(x, y)
    np.testing.assert_allclose(y, reference(x[:, start:], axis=1), rtol=1e-5, atol=1e-5)


def test_intermediate_buffer_matmul_then_relu(rng):
    a = te.placeholder((19, 23), name="A")
    b = te.placeholder((23, 17), name="B")
    r = te.reduce_axis((0, 23), name="k")
    c = te.compute((19, 17), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    d = te.compute((19, 17), lambda i, j: te.max(c[i, j], 0.0), name="D")
    lib = compiler.build(te.create_prim_func([a, b, d]))
    x = rng.standard_normal((19, 23)).astype("float32")
    w = rng.standard_normal((23, 17)).astype("float32")
    out = np.full((19, 17), np.nan, "float32")
    lib(x, w, out)
    np.testing.assert_allclose(out, np.maximum(x @ w, 0), rtol=1e-4, atol=1e-4)


_erf = np.vectorize(math.erf)

MATH_CASES = [
    ("exp", te.exp, np.exp, lambda x: x),
    ("log", te.log, np.log, lambda x: np.abs(x) + 0.1),
    ("sqrt", te.sqrt, np.sqrt, lambda x: np.abs(x)),
    ("tanh", te.tanh, np.tanh, lambda x: x),
    ("sigmoid", te.sigmoid, lambda x: 1 / (1 + np.exp(-x)), lambda x: x),
    ("erf", te.erf, _erf, lambda x: x),
    ("abs", te.abs, np.abs, lambda x: x),
    ("floor", te.floor, np.floor, lambda x: x * 3),
    ("ceil", te.ceil, np.ceil, lambda x: x * 3),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("name", "op", "reference", "domain"), MATH_CASES, ids=lambda c: c)
def test_math_intrinsics(rng, dtype, name, op, reference, domain):
    a = te.placeholder((41,), dtype, name="A")
    out = te.compute((41,), lambda i: op(a[i]), name="out")
    lib = compiler.build(te.create_prim_func([a, out]))
    x = domain(rng.standard_normal(41)).astype(dtype)
    y = np.zeros(41, dtype)
    lib(x, y)
    rtol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(y, reference(x).astype(dtype), rtol=rtol, atol=rtol)


def test_pow(rng):
    func = elementwise(33, lambda x, y: te.pow(x, y))
    lib = compiler.build(func)
    x = (np.abs(rng.standard_normal(33)) + 0.5).astype("float32")
    y = rng.standard_normal(33).astype("float32")
    z = np.zeros(33, "float32")
    lib(x, y, z)
    np.testing.assert_allclose(z, np.power(x, y), rtol=1e-5)


def test_casts_between_float_and_int(rng):
    a = te.placeholder((29,), "float32", name="A")
    to_int = te.compute((29,), lambda i: te.cast("int32", a[i] * 10.0), name="I")
    back = te.compute((29,), lambda i: te.cast("float64", to_int[i]) / 4.0, name="F")
    lib = compiler.build(te.create_prim_func([a, to_int, back]))
    x = rng.standard_normal(29).astype("float32")
    ints = np.zeros(29, "int32")
    floats = np.zeros(29, "float64")
    lib(x, ints, floats)
    expected = (x * np.float32(10.0)).astype("int32")
    np.testing.assert_array_equal(ints, expected)
    np.testing.assert_allclose(floats, expected.astype("float64") / 4.0)


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64"])
def test_integer_arithmetic(rng, dtype):
    """Floor division and modulo follow Python's floor semantics, ``/`` truncates, and
    narrow integer arithmetic wraps around like numpy's."""
    n = 57
    a = te.placeholder((n,), dtype, name="A")
    b = te.placeholder((n,), dtype, name="B")
    ops = {
        "add": lambda i: a[i] + b[i] * 3,
        "floordiv": lambda i: a[i] // b[i],
        "floormod": lambda i: a[i] % b[i],
        "truncdiv": lambda i: a[i] / b[i],
        "minmax": lambda i: te.max(te.min(a[i], b[i] * 2), b[i] - 5),
    }
    outs = [te.compute((n,), fn, name=name) for name, fn in ops.items()]
    lib = compiler.build(te.create_prim_func([a, b, *outs]))
    x = rng.integers(-100, 100, n).astype(dtype)
    y = rng.integers(1, 12, n).astype(dtype) * rng.choice([-1, 1], n).astype(dtype)
    results = [np.zeros(n, dtype) for _ in ops]
    lib(x, y, *results)
    with np.errstate(over="ignore"):
        expected = [
            x + y * np.array(3, dtype),
            x // y,
            x % y,
            (np.abs(x) // np.abs(y)) * np.sign(x) * np.sign(y),
            np.maximum(np.minimum(x, y * np.array(2, dtype)), y - np.array(5, dtype)),
        ]
    for name, got, want in zip(ops, results, expected, strict=True):
        np.testing.assert_array_equal(got, want.astype(dtype), err_msg=name)


def test_float64_and_bool_outputs(rng):
    a = te.placeholder((31,), "float64", name="A")
    b = te.placeholder((31,), "float64", name="B")
    greater = te.compute((31,), lambda i: a[i] > b[i], name="G")
    assert greater.dtype == "bool"
    chosen = te.compute(
        (31,), lambda i: te.if_then_else(greater[i], a[i] * b[i], a[i] - b[i]), name="S"
    )
    lib = compiler.build(te.create_prim_func([a, b, greater, chosen]))
    x, y = rng.standard_normal(31), rng.standard_normal(31)
    g = np.zeros(31, bool)
    s = np.zeros(31)
    lib(x, y, g, s)
    np.testing.assert_array_equal(g, x > y)
    np.testing.assert_allclose(s, np.where(x > y, x * y, x - y), rtol=1e-15)


def test_conv2d_with_padding_by_if_then_else(rng):
    """Reads outside the input are guarded, so they must never be executed."""
    batch, cin, height, width, cout, ksize, pad = 2, 3, 9, 11, 4, 3, 1
    data = te.placeholder((batch, cin, height, width), name="data")
    weight = te.placeholder((cout, cin, ksize, ksize), name="weight")
    rc = te.reduce_axis((0, cin), name="rc")
    ry = te.reduce_axis((0, ksize), name="ry")
    rx = te.reduce_axis((0, ksize), name="rx")

    def padded(n, c, y, x):
        inside = te.all_of(y >= 0, y < height, x >= 0, x < width)
        return te.if_then_else(inside, data[n, c, y, x], 0.0)

    out = te.compute(
        (batch, cout, height, width),
        lambda n, f, y, x: te.sum(
            padded(n, rc, y + ry - pad, x + rx - pad) * weight[f, rc, ry, rx],
            axis=[rc, ry, rx],
        ),
        name="conv",
    )
    lib = compiler.build(te.create_prim_func([data, weight, out]))
    d = rng.standard_normal((batch, cin, height, width)).astype("float32")
    w = rng.standard_normal((cout, cin, ksize, ksize)).astype("float32")
    got = np.zeros((batch, cout, height, width), "float32")
    lib(d, w, got)
    want = conv2d_nchw_im2col(d, w, padding=pad)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


# --- loop kinds on hand-modified IR -------------------------------------------------


def test_vectorized_elementwise_emits_vector_instructions(rng):
    func = with_loop_kinds(elementwise(1003, lambda x, y: x * y + 1.5), {"i": ForKind.VECTORIZED})
    lib = compiler.build(func)
    x, y = rng.standard_normal((2, 1003)).astype("float32")
    z = np.zeros(1003, "float32")
    lib(x, y, z)
    np.testing.assert_allclose(z, x * y + np.float32(1.5), rtol=1e-6, atol=1e-6)
    assert VECTOR_TYPE.search(lib.get_source("ll"))
    assert re.search(r"\b[yz]mm\d+\b", lib.get_source("asm"))


def test_kernels_ask_llvm_for_the_targets_vector_width():
    """LLVM tunes Intel's AVX-512 CPUs (Skylake-SP onwards) to prefer 256-bit vectors:
    the loops it vectorizes itself ran at half the width, ResNet-18's default schedules
    13 % slower on such a Xeon. A kernel says the target's width instead."""
    assert '"prefer-vector-width"="512"' in ModuleContext(1, 512).text([], [])
    assert "prefer-vector-width" not in ModuleContext(1, 0).text([], [])
    func = elementwise(4096, lambda x, y: x * y + 1.5)
    target = "llvm -mcpu=skylake-avx512"  # compiled, not run: any x86 host builds it
    lib = compiler.build(func, target=target, default_schedule=False)
    assert re.search(r"\bzmm\d+\b", lib.get_source("asm"))


def test_matmul_with_vectorized_inner_j(rng):
    func = swap_loops(matmul(24, 37, 64), "j", "k")
    func = with_loop_kinds(func, {"j": ForKind.VECTORIZED})
    lib = compiler.build(func)
    a = rng.standard_normal((24, 37)).astype("float32")
    b = rng.standard_normal((37, 64)).astype("float32")
    c = np.zeros((24, 64), "float32")
    lib(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    ir = lib.get_source("ll")
    assert re.search(r"(fmul|fadd|fma)[^\n]*<\d+ x float>", ir)


def test_parallel_loop_runs_through_openmp(rng):
    func = with_loop_kinds(matmul(45, 31, 27), {"i": ForKind.PARALLEL})
    lib = compiler.build(func, target="llvm -num-cores=2")
    a = rng.standard_normal((45, 31)).astype("float32")
    b = rng.standard_normal((31, 27)).astype("float32")
    c = np.zeros((45, 27), "float32")
    lib(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    ir = lib.get_source("ll")
    assert re.search(r"call void @GOMP_parallel\(ptr nonnull @\w+, ptr [^,]+, i32 2, i32 0\)", ir)
    assert "omp_get_thread_num" in ir


def test_nested_parallel_loop_is_serial(rng):
    func = with_loop_kinds(matmul(9, 8, 7), {"i": ForKind.PARALLEL, "j": ForKind.PARALLEL})
    lib = compiler.build(func)
    a = rng.standard_normal((9, 8)).astype("float32")
    b = rng.standard_normal((8, 7)).astype("float32")
    c = np.zeros((9, 7), "float32")
    lib(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    assert lib.get_source("ll").count("call void @GOMP_parallel") == 1


def test_parallel_loop_with_symbolic_extent_smaller_than_team(rng):
    n = te.var("n")
    a = te.placeholder((n,), name="A")
    b = te.compute((n,), lambda i: a[i] * 2.0, name="B")
    lib = compiler.build(with_loop_kinds(te.create_prim_func([a, b]), {"i": ForKind.PARALLEL}))
    for size in (1, 2, 3, 1001):
        x = rng.standard_normal(size).astype("float32")
        y = np.zeros(size, "float32")
        lib(x, y)
        np.testing.assert_allclose(y, 2 * x)


def _rowwise_with_scratch(rows: int, cols: int) -> PrimFunc:
    """for i (parallel): T = scratch(cols); T[k] = 2 A[i,k]; B[i,k] = T[k] + T[cols-1-k]."""
    a = Buffer("A", (E.const(rows), E.const(cols)))
    b = Buffer("B", (E.const(rows), E.const(cols)))
    scratch = Buffer("T", (E.const(cols),))
    i, k, k2 = Var("i"), Var("k"), Var("k2")
    fill = For(
        k, E.const(0), E.const(cols), ForKind.SERIAL, BufferStore(scratch, a[i, k] * 2.0, (k,))
    )
    mirror = scratch[k2] + scratch[cols - 1 - k2]
    use = For(k2, E.const(0), E.const(cols), ForKind.SERIAL, BufferStore(b, mirror, (i, k2)))
    body = For(i, E.const(0), E.const(rows), ForKind.PARALLEL, Allocate(scratch, seq(fill, use)))
    root = Block("root", (), body)
    return PrimFunc((a, b), BlockRealize((), true_predicate(), root), {"global_symbol": "main"})


@pytest.mark.parametrize("cols", [37, 20011], ids=["stack", "heap"])
def test_allocate_inside_parallel_loop_is_per_thread(rng, cols):
    lib = compiler.build(_rowwise_with_scratch(16, cols), target="llvm -num-cores=2")
    x = rng.standard_normal((16, cols)).astype("float32")
    y = np.zeros_like(x)
    lib(x, y)
    np.testing.assert_allclose(y, 2 * x + 2 * x[:, ::-1], rtol=1e-6)
    ir = lib.get_source("ll")
    assert ("aligned_alloc" in ir) == (cols * 4 > 64 * 1024)


@pytest.mark.parametrize("extent", [6, 200])
def test_unrolled_loop(rng, extent):
    func = with_loop_kinds(elementwise(extent, lambda x, y: x - y * 2.0), {"i": ForKind.UNROLLED})
    lib = compiler.build(func)
    x, y = rng.standard_normal((2, extent)).astype("float32")
    z = np.zeros(extent, "float32")
    lib(x, y, z)
    np.testing.assert_allclose(z, x - 2 * y, rtol=1e-6)


def test_target_strings():
    target = LLVMTarget.parse("llvm -mcpu=znver3 -num-cores=2")
    assert (target.cpu, target.num_cores) == ("znver3", 2)
    assert target.vector_bits == 256
    assert target.threads == 2
    assert LLVMTarget.parse("llvm").num_cores == 0
    with pytest.raises(TargetError, match="allowed forms"):
        LLVMTarget.parse("cuda")
    with pytest.raises(ValueError, match="-num-cores"):
        LLVMTarget.parse("llvm -threads=3")


def test_build_for_a_named_cpu_runs(rng):
    lib = compiler.build(matmul(5, 6, 7), target="llvm -mcpu=x86-64-v3 -num-cores=2")
    a = rng.standard_normal((5, 6)).astype("float32")
    b = rng.standard_normal((6, 7)).astype("float32")
    c = np.zeros((5, 7), "float32")
    lib(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


# --- integer semantics, property-based -------------------------------------------

_A = Buffer("A", (E.const(64),), "int32")
_B = Buffer("B", (E.const(64),), "int32")
_I = Var("i")
_A_VALUES = np.random.default_rng(1).integers(-50, 50, 64).astype("int32")
_B_VALUES = np.random.default_rng(2).integers(1, 9, 64).astype("int32") * np.resize(
    np.array([1, -1], "int32"), 64
)


def _int_exprs() -> st.SearchStrategy:
    """Small int32 expressions of A[i] and B[i]; B is never zero, so it may divide."""
    divisor = st.one_of(st.just(_B[_I]), st.sampled_from([-7, -3, -1, 2, 5]).map(E.const))
    leaves = st.one_of(st.sampled_from([_A[_I], _B[_I]]), st.integers(-9, 9).map(E.const))

    def extend(children: st.SearchStrategy) -> st.SearchStrategy:
        ops = st.sampled_from([E.Add, E.Sub, E.Mul, E.Min, E.Max])
        divisions = st.sampled_from([E.FloorDiv, E.FloorMod, E.Div])
        return st.one_of(
            st.builds(lambda op, a, b: op(a, b), ops, children, children),
            st.builds(lambda op, a, b: op(a, b), divisions, children, divisor),
            st.builds(lambda a, b, c: E.Select(E.LT(a, b), c, a), children, children, children),
        )

    return st.recursive(leaves, extend, max_leaves=7)


def _numpy_eval(e: E.PrimExpr) -> np.ndarray:
    if isinstance(e, E.IntImm):
        return np.full(64, e.value, np.int64)
    if isinstance(e, E.BufferLoad):
        return (_A_VALUES if e.buffer is _A else _B_VALUES).astype(np.int64)
    if isinstance(e, E.Select):
        less = _numpy_eval(e.condition.a) < _numpy_eval(e.condition.b)
        return np.where(less, _numpy_eval(e.true_value), _numpy_eval(e.false_value))
    x, y = _numpy_eval(e.a), _numpy_eval(e.b)
    if isinstance(e, E.Div):
        return np.sign(x) * np.sign(y) * (np.abs(x) // np.abs(y))
    return NUMPY_INT_OPS[type(e)](x, y)


@settings(max_examples=40, deadline=None)
@given(_int_exprs())
def test_integer_expressions_match_numpy(expr):
    """Compiled int32 expression trees agree with numpy's floor and truncation semantics."""
    out = Buffer("Out", (E.const(64),), "int32")
    body = For(_I, E.const(0), E.const(64), ForKind.SERIAL, BufferStore(out, expr, (_I,)))
    root = BlockRealize((), true_predicate(), Block("root", (), body))
    lib = compiler.build(PrimFunc((_A, _B, out), root, {"global_symbol": "main"}))
    got = np.zeros(64, "int32")
    lib(_A_VALUES, _B_VALUES, got)
    np.testing.assert_array_equal(got, _numpy_eval(expr), err_msg=str(expr))


def test_a_loop_around_a_short_vector_loop_is_not_vectorized_with_gathers(rng):
    """A blocked bias add: its vector loop is the 8-channel block, half an AVX-512
    vector. LLVM unrolls such a loop whole; its vectorizer then took the loop around it
    and made gathers and scatters across the block. The loop around is marked not to
    be vectorized, so the block's 8 lanes stay one vector."""
    data = te.placeholder((4, 7, 7, 8), name="data")
    bias = te.placeholder((4, 8), name="bias")
    out = te.compute((4, 7, 7, 8), lambda c, y, x, b: data[c, y, x, b] + bias[c, b], name="out")
    func = default_schedule(te.create_prim_func([data, bias, out]), target=AVX512)
    kinds = []
    visit(func.body, lambda n: kinds.append(n.kind) if isinstance(n, For) else None)
    assert kinds[-1] is ForKind.VECTORIZED
    avx512 = compiler.build(func, AVX512)
    assert not re.search(r"gather|scatter", avx512.get_source("asm"))
    d = rng.standard_normal((4, 7, 7, 8)).astype("float32")
    b = rng.standard_normal((4, 8)).astype("float32")
    got = np.zeros_like(d)
    compiler.build(func)(d, b, got)
    np.testing.assert_array_equal(got, d + b[:, None, None, :])


KEEP_OUT = '!"llvm.loop.vectorize.enable", i1 false'


def test_only_a_loop_around_a_streaming_vector_loop_is_kept_from_vectorizing(tmp_path):
    """A transpose whose vector loop reads a column gathers anyway: the loop around it
    stays LLVM's to vectorize (it reads rows). A copy whose vector loop streams keeps
    the loop around it scalar."""
    a = te.placeholder((64, 48), name="A")
    column = te.compute((48, 64), lambda i, j: a[j, i], name="T")
    row = te.compute((64, 48), lambda i, j: a[i, j] * 2.0, name="R")
    for out, kept in ((column, False), (row, True)):
        func = with_loop_kinds(te.create_prim_func([a, out]), {"j": ForKind.VECTORIZED})
        folder = tmp_path / out.op.name
        compiler.build(func, dump_ir=folder)
        (text,) = [p.read_text() for p in folder.iterdir() if p.name.endswith("-llvm.ll")]
        assert (KEEP_OUT in text) is kept


def test_numbered_names_never_meet_whatever_their_hints_end_in() -> None:
    """The fast exp's "exp_r2" numbered 56 once met "exp_r" numbered 256."""
    emitter = ExprEmitter(ModuleContext(num_threads=2), "main")
    hints = {56: "exp_r2", 256: "exp_r", 300: "x1", 301: "x1.", 330: "for.head"}
    names = [emitter.fresh(hints.get(k, "t")) for k in range(1, 400)]
    names += [f"%{emitter.label(hints.get(k, 'for.body'))}" for k in range(400, 800)]
    assert len(set(names)) == len(names) == 799
