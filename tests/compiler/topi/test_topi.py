"""Every operator in compiler.topi against a numpy reference, built with the LLVM backend.

Shapes are small and mostly odd so the unscheduled loops stay fast and no operator
can rely on a power-of-two size. Operators whose loads sit inside a select (pad,
concatenate, padded convolution and pooling) also run in the strict reference
interpreter, which fails on any out-of-bounds access.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ir_interpreter import run_func

import compiler
from compiler import te, topi
from compiler.te import Tensor
from compiler.topi import OperatorError
from compiler.topi.reference import conv2d_nchw_im2col

RNG = np.random.default_rng(20240601)


def normal(*shape: int, dtype: str = "float32") -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def positive(*shape: int) -> np.ndarray:
    return RNG.uniform(0.5, 2.0, shape).astype("float32")


def placeholders(*arrays: np.ndarray) -> list[Tensor]:
    return [te.placeholder(a.shape, str(a.dtype), name=f"in{k}") for k, a in enumerate(arrays)]


def run(inputs: Sequence[Tensor], output: Tensor, arrays: Sequence[np.ndarray]) -> np.ndarray:
    """Build ``inputs -> output`` with LLVM and run it; the output starts as NaN so an
    element the kernel never writes shows up."""
    func = te.create_prim_func([*inputs, output])
    result = np.full(tuple(int(d) for d in output.shape), np.nan, dtype=output.dtype)
    compiler.build(func)(*arrays, result)
    return result


def interpret(inputs: Sequence[Tensor], output: Tensor, arrays: Sequence[np.ndarray]) -> np.ndarray:
    func = te.create_prim_func([*inputs, output])
    result = np.full(tuple(int(d) for d in output.shape), np.nan, dtype=output.dtype)
    run_func(func, *arrays, result)
    return result


def check(
    operator: Callable[..., Tensor],
    arrays: Sequence[np.ndarray],
    expected: np.ndarray,
    tol: float = 1e-5,
) -> None:
    inputs = placeholders(*arrays)
    output = operator(*inputs)
    assert tuple(int(d) for d in output.shape) == expected.shape
    got = run(inputs, output, arrays)
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)


# ---- elementwise, broadcast, reductions, layout -------------------------------------------

ERF = np.vectorize(math.erf)

UNARY: dict[str, tuple[Callable[[np.ndarray], np.ndarray], Callable[..., np.ndarray]]] = {
    "relu": (lambda x: np.maximum(x, 0), normal),
    "exp": (np.exp, normal),
    "log": (np.log, positive),
    "sqrt": (np.sqrt, positive),
    "tanh": (np.tanh, normal),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), normal),
    "gelu": (lambda x: 0.5 * x * (1 + ERF(x / math.sqrt(2))), normal),
    "abs": (np.abs, normal),
    "negative": (np.negative, normal),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name: str) -> None:
    reference, sample = UNARY[name]
    x = sample(3, 5, 7)
    check(getattr(topi, name), [x], reference(x.astype("float64")))


BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "power": np.power,
}
SHAPE_PAIRS = [((3, 1, 5), (4, 1)), ((5,), (2, 3, 5)), ((2, 3), (2, 3)), ((1,), (3, 1))]


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shapes", SHAPE_PAIRS, ids=str)
def test_binary_broadcasts_like_numpy(name: str, shapes: tuple[tuple[int, ...], ...]) -> None:
    a, b = (positive(*s) if name in ("divide", "power") else normal(*s) for s in shapes)
    check(getattr(topi, name), [a, b], BINARY[name](a.astype("float64"), b), tol=1e-5)


def test_binary_with_a_python_number() -> None:
    x = normal(3, 5)
    check(lambda t: topi.subtract(1.5, t), [x], 1.5 - x)
    check(lambda t: topi.multiply(t, 3), [x], x * 3)
    base = positive(4)
    check(lambda t: topi.power(t, np.float32(2.0)), [base], base.astype("float64") ** 2)
    check(lambda t: topi.maximum(np.int64(0), t), [x], np.maximum(x, 0))


def test_float64_stays_float64() -> None:
    a, b = normal(5, 7, dtype="float64"), normal(7, 3, dtype="float64")
    check(lambda x, y: topi.softmax(topi.matmul(x, y)), [a, b], ref_softmax(a @ b, -1), 1e-12)
    x = normal(1, 4, 7, 6, dtype="float64")
    check(lambda t: topi.avg_pool2d(t, 3, 2, 1), [x], ref_pool(x, 3, 2, 1, "avg", False), 1e-12)


@pytest.mark.parametrize("name", ["sum", "max", "min", "mean"])
@pytest.mark.parametrize(
    ("axis", "keepdims"), [(1, False), ((0, 2), False), (-1, True), (None, True), (None, False)]
)
def test_reductions(name: str, axis: Any, keepdims: bool) -> None:
    x = normal(3, 5, 7)
    reference = getattr(np, name)(x.astype("float64"), axis=axis, keepdims=keepdims)
    check(lambda t: getattr(topi, name)(t, axis, keepdims), [x], np.asarray(reference), tol=1e-5)


@pytest.mark.parametrize("axes", [None, (1, 2, 0), (0, 2, 1), (-1, 0, 1)], ids=str)
def test_transpose(axes: Any) -> None:
    x = normal(3, 5, 7)
    check(lambda t: topi.transpose(t, axes), [x], np.transpose(x, axes))


@pytest.mark.parametrize("newshape", [(5, -1), (105,), (7, 3, 5), (3, 5, 7), (1, 15, 7, 1)])
def test_reshape(newshape: tuple[int, ...]) -> None:
    x = normal(3, 5, 7)
    check(lambda t: topi.reshape(t, newshape), [x], x.reshape(newshape))


def test_pad_with_a_constant() -> None:
    x = normal(3, 5, 2)
    expected = np.pad(x, ((1, 2), (0, 3), (2, 0)), constant_values=-1.5)
    check(lambda t: topi.pad(t, (1, 0, 2), (2, 3, 0), pad_value=-1.5), [x], expected)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concatenate(axis: int) -> None:
    shapes = {0: [(2, 3), (1, 3), (4, 3)], 1: [(3, 2), (3, 4), (3, 1)], -1: [(3, 2), (3, 5)]}
    arrays = [normal(*s) for s in shapes[axis]]
    check(lambda *ts: topi.concatenate(ts, axis), arrays, np.concatenate(arrays, axis))


def test_concatenate_one_tensor_is_a_copy() -> None:
    x = normal(3, 5)
    check(lambda t: topi.concatenate([t], 1), [x], x)


# ---- matrix products ------------------------------------------------------------------------


@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_matmul(transpose_a: bool, transpose_b: bool) -> None:
    a, b = normal(5, 7), normal(7, 3)
    a_in = a.T.copy() if transpose_a else a
    b_in = b.T.copy() if transpose_b else b
    expected = a.astype("float64") @ b
    check(lambda x, y: topi.matmul(x, y, transpose_a, transpose_b), [a_in, b_in], expected, 1e-4)


@pytest.mark.parametrize("activation", [None, "relu", "gelu", "sigmoid"])
@pytest.mark.parametrize("with_bias", [True, False])
def test_dense(activation: str | None, with_bias: bool) -> None:
    x, w, bias = normal(5, 11), normal(7, 11), normal(7)
    y = x.astype("float64") @ w.T + (bias if with_bias else 0)
    expected = {
        None: y,
        "relu": np.maximum(y, 0),
        "gelu": 0.5 * y * (1 + ERF(y / math.sqrt(2))),
        "sigmoid": 1 / (1 + np.exp(-y)),
    }[activation]
    if with_bias:
        check(lambda a, b, c: topi.dense(a, b, c, activation), [x, w, bias], expected, 1e-4)
    else:
        check(lambda a, b: topi.dense(a, b, None, activation), [x, w], expected, 1e-4)


def test_dense_fuses_the_activation_into_one_epilogue() -> None:
    x, w, b = placeholders(normal(5, 11), normal(7, 11), normal(7))
    func = te.create_prim_func([x, w, b, topi.dense(x, w, b, "gelu")])
    intermediates = [b.name for b in func.root_block.alloc_buffers]
    assert intermediates == ["T_dense"]
    assert "erf" in func.script()


@pytest.mark.parametrize(("batch_a", "batch_b"), [(3, 3), (1, 3), (3, 1)])
def test_batch_matmul(batch_a: int, batch_b: int) -> None:
    a, b = normal(batch_a, 5, 7), normal(batch_b, 7, 3)
    check(topi.batch_matmul, [a, b], np.matmul(a.astype("float64"), b), 1e-4)


def test_batch_matmul_transposed() -> None:
    a, b = normal(2, 7, 5), normal(2, 3, 7)
    expected = np.matmul(a.transpose(0, 2, 1).astype("float64"), b.transpose(0, 2, 1))
    check(lambda x, y: topi.batch_matmul(x, y, True, True), [a, b], expected, 1e-4)


# ---- convolution ------------------------------------------------------------------------------


def pad_tuple(padding: Any) -> tuple[int, int, int, int]:
    if isinstance(padding, int):
        return padding, padding, padding, padding
    if len(padding) == 2:
        return padding[0], padding[1], padding[0], padding[1]
    return tuple(padding)  # type: ignore[return-value]


def pair(value: Any) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else tuple(value)  # type: ignore[return-value]


def ref_conv2d_nchw(
    x: np.ndarray, w: np.ndarray, stride: Any, padding: Any, dilation: Any, groups: int
) -> np.ndarray:
    return conv2d_nchw_im2col(
        x.astype("float64"), w.astype("float64"), stride, padding, dilation, groups
    )


# (batch, channels, height, width, out_channels, kernel, stride, padding, dilation, groups)
CONVS = [
    (1, 8, 9, 9, 8, 3, 1, 1, 1, 1),
    (2, 8, 9, 7, 6, (3, 2), 2, (1, 0, 2, 1), 1, 2),
    (1, 6, 11, 10, 9, 3, (2, 1), 2, 2, 3),
    (1, 4, 9, 9, 8, 3, 1, (1, 2), (1, 2), 4),
    (1, 3, 5, 6, 5, 1, 1, 0, 1, 1),
]


@pytest.mark.parametrize("case", CONVS, ids=str)
def test_conv2d_nchw(case: tuple[Any, ...]) -> None:
    n, c, h, w, o, k, stride, padding, dilation, groups = case
    kh, kw = pair(k)
    x, weight = normal(n, c, h, w), normal(o, c // groups, kh, kw)
    expected = ref_conv2d_nchw(x, weight, stride, padding, dilation, groups)
    op = lambda a, b: topi.conv2d_nchw(a, b, stride, padding, dilation, groups)  # noqa: E731
    check(op, [x, weight], expected, tol=1e-4)


@pytest.mark.parametrize("case", CONVS, ids=str)
def test_conv2d_nhwc(case: tuple[Any, ...]) -> None:
    n, c, h, w, o, k, stride, padding, dilation, groups = case
    kh, kw = pair(k)
    x, weight = normal(n, c, h, w), normal(o, c // groups, kh, kw)
    expected = ref_conv2d_nchw(x, weight, stride, padding, dilation, groups).transpose(0, 2, 3, 1)
    x_nhwc = x.transpose(0, 2, 3, 1).copy()
    weight_hwio = weight.transpose(2, 3, 1, 0).copy()
    op = lambda a, b: topi.conv2d_nhwc(a, b, stride, padding, dilation, groups)  # noqa: E731
    check(op, [x_nhwc, weight_hwio], expected, tol=1e-4)


@pytest.mark.parametrize(
    ("multiplier", "stride", "padding", "dilation"), [(1, 1, 1, 1), (2, 2, (0, 1), (2, 1))]
)
def test_depthwise_conv2d_nchw(multiplier: int, stride: Any, padding: Any, dilation: Any) -> None:
    x, weight = normal(2, 5, 9, 8), normal(5, multiplier, 3, 3)
    as_grouped = weight.reshape(5 * multiplier, 1, 3, 3)
    expected = ref_conv2d_nchw(x, as_grouped, stride, padding, dilation, groups=5)
    op = lambda a, b: topi.depthwise_conv2d_nchw(a, b, stride, padding, dilation)  # noqa: E731
    check(op, [x, weight], expected, tol=1e-4)


def test_conv2d_nchw_bias_relu() -> None:
    x, weight, bias = normal(1, 8, 9, 9), normal(6, 4, 3, 3), normal(6)
    conv = ref_conv2d_nchw(x, weight, 1, 1, 1, groups=2)
    expected = np.maximum(conv + bias[None, :, None, None], 0)
    op = lambda a, b, c: topi.conv2d_nchw_bias_relu(a, b, c, 1, 1, 1, 2)  # noqa: E731
    check(op, [x, weight, bias], expected, tol=1e-4)


@settings(max_examples=12, deadline=None)
@given(
    size=st.tuples(st.integers(3, 8), st.integers(3, 8)),
    kernel=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    stride=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    padding=st.tuples(*[st.integers(0, 2)] * 4),
    dilation=st.tuples(st.integers(1, 2), st.integers(1, 2)),
    groups=st.sampled_from([1, 2]),
)
def test_conv2d_nchw_matches_numpy_for_any_window(
    size: tuple[int, int],
    kernel: tuple[int, int],
    stride: tuple[int, int],
    padding: tuple[int, int, int, int],
    dilation: tuple[int, int],
    groups: int,
) -> None:
    span = [(k - 1) * d + 1 for k, d in zip(kernel, dilation, strict=True)]
    padded = [size[0] + padding[0] + padding[2], size[1] + padding[1] + padding[3]]
    x, weight = normal(1, 4, *size), normal(3 * groups, 4 // groups, *kernel)
    if span[0] > padded[0] or span[1] > padded[1]:
        with pytest.raises(OperatorError, match="dilated kernel"):
            topi.conv2d_nchw(*placeholders(x, weight), stride, padding, dilation, groups)
        return
    expected = ref_conv2d_nchw(x, weight, stride, padding, dilation, groups)
    op = lambda a, b: topi.conv2d_nchw(a, b, stride, padding, dilation, groups)  # noqa: E731
    check(op, [x, weight], expected, tol=1e-4)


# ---- pooling, softmax, layer_norm -------------------------------------------------------------


def ref_pool(
    x: np.ndarray, kernel: Any, stride: Any, padding: Any, kind: str, count_include_pad: bool
) -> np.ndarray:
    (kh, kw), (sh, sw) = pair(kernel), pair(stride)
    top, left, bottom, right = pad_tuple(padding)
    widths = ((0, 0), (0, 0), (top, bottom), (left, right))
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x.astype("float64"), widths, constant_values=fill)
    real = np.pad(np.ones(x.shape), widths)
    oh = (xp.shape[2] - kh) // sh + 1
    ow = (xp.shape[3] - kw) // sw + 1
    windows = []
    counts = np.zeros((1, 1, oh, ow))
    for ry in range(kh):
        for rx in range(kw):
            rows = slice(ry, ry + (oh - 1) * sh + 1, sh)
            cols = slice(rx, rx + (ow - 1) * sw + 1, sw)
            windows.append(xp[:, :, rows, cols])
            counts = counts + real[:1, :1, rows, cols]
    if kind == "max":
        return np.max(windows, axis=0)
    total = np.sum(windows, axis=0)
    return total / (kh * kw) if count_include_pad else total / counts


POOLS = [(3, 1, 1), (3, 2, 1), ((2, 3), (1, 2), (1, 0, 0, 2)), (2, 2, 0), (3, 3, (2, 2, 0, 1))]


@pytest.mark.parametrize(("kernel", "stride", "padding"), POOLS, ids=str)
def test_max_pool2d(kernel: Any, stride: Any, padding: Any) -> None:
    x = normal(2, 3, 9, 7)
    expected = ref_pool(x, kernel, stride, padding, "max", False)
    check(lambda t: topi.max_pool2d(t, kernel, stride, padding), [x], expected)


@pytest.mark.parametrize("count_include_pad", [False, True])
@pytest.mark.parametrize(("kernel", "stride", "padding"), POOLS, ids=str)
def test_avg_pool2d(kernel: Any, stride: Any, padding: Any, count_include_pad: bool) -> None:
    x = normal(2, 3, 9, 7)
    expected = ref_pool(x, kernel, stride, padding, "avg", count_include_pad)
    op = lambda t: topi.avg_pool2d(t, kernel, stride, padding, count_include_pad)  # noqa: E731
    check(op, [x], expected)


def test_avg_pool2d_counts_only_real_elements_by_default() -> None:
    """On a constant image the default keeps the constant; count_include_pad=True
    pulls the border towards the padding's zeros."""
    x = np.full((1, 1, 3, 3), 2.0, dtype="float32")
    check(lambda t: topi.avg_pool2d(t, 3, 1, 1), [x], x)
    real_per_window = np.array([[4, 6, 4], [6, 9, 6], [4, 6, 4]]).reshape(1, 1, 3, 3)
    including = lambda t: topi.avg_pool2d(t, 3, 1, 1, count_include_pad=True)  # noqa: E731
    check(including, [x], 2.0 * real_per_window / 9)


def test_global_avg_pool2d() -> None:
    x = normal(2, 3, 9, 7)
    check(topi.global_avg_pool2d, [x], x.astype("float64").mean(axis=(2, 3), keepdims=True))


@pytest.mark.parametrize(
    "pool",
    [
        lambda t: topi.max_pool2d(t, 3, 2, 1),
        lambda t: topi.avg_pool2d(t, 3, 2, 1),
        lambda t: topi.avg_pool2d(t, 2, 1, (1, 0), count_include_pad=True),
        topi.global_avg_pool2d,
    ],
)
def test_a_blocked_pooling_pools_each_channel_of_the_block(pool) -> None:
    """(N, C/b, H, W, b): the NCHW pooling's result, blocked the same way."""
    x = normal(2, 8, 9, 7)
    blocked = np.ascontiguousarray(x.reshape(2, 2, 4, 9, 7).transpose(0, 1, 3, 4, 2))
    (plain,) = placeholders(x)
    expected = run([plain], pool(plain), [x])
    n, c, h, w = expected.shape
    expected = expected.reshape(n, c // 4, 4, h, w).transpose(0, 1, 3, 4, 2)
    check(pool, [blocked], expected)


def ref_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    shifted = x.astype("float64") - x.max(axis=axis, keepdims=True)
    return np.exp(shifted) / np.exp(shifted).sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_is_stable_for_large_inputs(axis: int) -> None:
    x = (normal(3, 5, 7) * 10 + 200).astype("float32")
    check(lambda t: topi.softmax(t, axis), [x], ref_softmax(x, axis), tol=1e-5)


@pytest.mark.parametrize("axis", [-1, 1])
def test_log_softmax(axis: int) -> None:
    x = (normal(3, 5, 7) * 10 + 200).astype("float32")
    check(lambda t: topi.log_softmax(t, axis), [x], np.log(ref_softmax(x, axis)), tol=1e-4)


@pytest.mark.parametrize("axis", [-1, (1, 2), (0, 2)], ids=str)
def test_layer_norm(axis: Any) -> None:
    x = (normal(3, 5, 7) + 10).astype("float32")
    axes = tuple(a % 3 for a in ((axis,) if isinstance(axis, int) else axis))
    normalized = tuple(x.shape[a] for a in axes)
    gamma, beta = normal(*normalized), normal(*normalized)
    x64 = x.astype("float64")
    mean = x64.mean(axis=axes, keepdims=True)
    var = x64.var(axis=axes, keepdims=True)
    shape = [x.shape[a] if a in axes else 1 for a in range(3)]
    expected = (x64 - mean) / np.sqrt(var + 1e-5) * gamma.reshape(shape) + beta.reshape(shape)
    check(lambda a, g, b: topi.layer_norm(a, g, b, axis, 1e-5), [x, gamma, beta], expected, 1e-4)


# ---- strict bounds in the reference interpreter ------------------------------------------------


SELECTS: dict[str, tuple[Callable[..., Tensor], list[tuple[int, ...]]]] = {
    "pad": (lambda t: topi.pad(t, (2, 1), (1, 3), 0.5), [(3, 4)]),
    "concatenate": (lambda *ts: topi.concatenate(ts, 1), [(2, 3), (2, 1), (2, 2)]),
    "conv2d": (lambda a, b: topi.conv2d_nchw(a, b, 2, (1, 2, 2, 1)), [(1, 2, 5, 4), (2, 2, 3, 3)]),
    "avg_pool2d": (lambda t: topi.avg_pool2d(t, 3, 2, 2), [(1, 2, 5, 4)]),
    "max_pool2d": (lambda t: topi.max_pool2d(t, 2, 1, (1, 0)), [(1, 2, 5, 4)]),
}


@pytest.mark.parametrize("name", sorted(SELECTS))
def test_interpreter_agrees_and_every_load_is_in_bounds(name: str) -> None:
    op, shapes = SELECTS[name]
    arrays = [normal(*s) for s in shapes]
    inputs = placeholders(*arrays)
    output = op(*inputs)
    np.testing.assert_allclose(
        interpret(inputs, output, arrays), run(inputs, output, arrays), rtol=1e-5, atol=1e-5
    )


# ---- argument errors -------------------------------------------------------------------------

A = te.placeholder((1, 3, 9, 9), name="A")
W = te.placeholder((4, 3, 3, 3), name="W")
M = te.placeholder((5, 7), name="M")
I = te.placeholder((5, 7), "int32", name="I")  # noqa: E741


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: topi.conv2d_nchw(A, W, groups=2),
            "conv2d_nchw: channels 3 not divisible by groups 2",
        ),
        (
            lambda: topi.conv2d_nchw(A, te.placeholder((4, 2, 3, 3)), groups=1),
            "kernel (4, 2, 3, 3) has 2 input channels",
        ),
        (
            lambda: topi.conv2d_nchw(A, W, stride=0),
            "conv2d_nchw: stride[0] must be positive, got 0",
        ),
        (
            lambda: topi.conv2d_nchw(A, W, padding=(1, 2, 3)),
            "conv2d_nchw: padding must be an int or 2 ints",
        ),
        (
            lambda: topi.conv2d_nchw(A, W, dilation=5),
            "conv2d_nchw: the height of the dilated kernel (11)",
        ),
        (lambda: topi.conv2d_nchw(M, W), "conv2d_nchw: data must have 4 dimensions, got 2"),
        (lambda: topi.conv2d_nchw(A, "W"), "conv2d_nchw: kernel must be a te.Tensor, got str"),
        (
            lambda: topi.conv2d_nhwc(A, W),
            "conv2d_nhwc: kernel (4, 3, 3, 3) has 3 input channels but data has 9",
        ),
        (
            lambda: topi.depthwise_conv2d_nchw(A, W),
            "depthwise_conv2d_nchw: kernel (4, 3, 3, 3) is for 4 channels",
        ),
        (lambda: topi.matmul(M, M), "matmul: the reduction sizes differ"),
        (
            lambda: topi.matmul(M, I, transpose_b=True),
            "matmul: inputs must share one dtype (a is float32, b is int32)",
        ),
        (
            lambda: topi.dense(M, M, activation="tanh"),
            "dense: activation must be None or one of relu, gelu, sigmoid",
        ),
        (
            lambda: topi.dense(M, M, te.placeholder((4,))),
            "dense: bias has shape (4,) but weight has 5",
        ),
        (lambda: topi.batch_matmul(A, A), "batch_matmul: a must have 3 dimensions"),
        (
            lambda: topi.max_pool2d(A, 2, padding=2),
            "max_pool2d: padding top 2 must be smaller than the kernel (2)",
        ),
        (lambda: topi.avg_pool2d(I, 2), "avg_pool2d: data must be NCHW (4 dimensions)"),
        (lambda: topi.softmax(M, axis=2), "softmax: axis 2 is out of range for 2 dimensions"),
        (lambda: topi.softmax(I), "softmax: x has dtype int32; expected one of float16"),
        (lambda: topi.exp(I), "exp: x has dtype int32"),
        (
            lambda: topi.layer_norm(M, M, M),
            "layer_norm: gamma has shape (5, 7) but the normalized axes [1]",
        ),
        (
            lambda: topi.add(M, te.placeholder((3,))),
            "add: shapes (5, 7) and (3,) do not broadcast: 7 vs 3 at axis -1",
        ),
        (lambda: topi.add(I, 2.5), "add: b is the float 2.5 but the tensor is int32"),
        (lambda: topi.add(1, 2), "add: at least one of a and b must be a te.Tensor"),
        (lambda: topi.sum(M, axis=(1, -1)), "sum: axis [1, -1] names an axis twice"),
        (lambda: topi.sum(M, keepdims=1), "sum: keepdims must be True or False"),
        (lambda: topi.transpose(M, (0, 0)), "transpose: axes [0, 0] is not a permutation"),
        (
            lambda: topi.reshape(M, (6, -1)),
            "reshape: cannot fit 35 elements of shape (5, 7) into [6, -1]",
        ),
        (lambda: topi.reshape(M, (5, 8)), "reshape: newshape [5, 8] has 40 elements but a has 35"),
        (lambda: topi.pad(M, (1,)), "pad: pad_before must list 2 widths"),
        (lambda: topi.pad(M, (1, -1)), "pad: pad_before[1] must be at least 0, got -1"),
        (lambda: topi.concatenate([M, I]), "concatenate: inputs must share one dtype"),
        (lambda: topi.concatenate([]), "concatenate: tensors must be a non-empty list"),
        (
            lambda: topi.reshape(te.placeholder((te.var("n"), 3)), (3, -1)),
            "reshape: a has the symbolic shape (n, 3)",
        ),
    ],
)
def test_bad_arguments_raise_operator_error(call: Callable[[], Any], message: str) -> None:
    with pytest.raises(OperatorError) as info:
        call()
    assert message in str(info.value), str(info.value)


def test_symbolic_sizes_work_where_no_constant_is_needed() -> None:
    n = te.var("n")
    a, b = te.placeholder((n, 3), name="a"), te.placeholder((3, 4), name="b")
    func = te.create_prim_func([a, b, topi.relu(topi.matmul(a, b))])
    assert [v.name for v in func.size_vars] == ["n"]
