"""numpy references for the operator library, keyed by the op name of a workload spec.

One place computes what an operator must return, for every package that asks: the
workers check candidates against it, the benchmarks time it as the baseline a user
would otherwise write, and the tests compare the library with it. Each entry is the
strongest plain-numpy formulation we know, not the naive loop: convolutions are
im2col (``np.pad``, ``sliding_window_view``, then one matmul laid out so that no
large transpose is copied), which is also why ``conv2d_nchw_im2col`` is public.

``NUMPY_REFERENCES[op].compute(*inputs, **args)`` takes the spec's input arrays in
the workload's parameter order and its normalised args, and returns the list of
outputs; ``numpy_function(spec)`` binds the args and returns the one output.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from compiler.topi.errors import OperatorError
from compiler.topi.nn.conv2d import get_pad_tuple

NumpyFn = Callable[..., list[np.ndarray]]
IntOrPair = int | Sequence[int]


@dataclass(frozen=True)
class NumpyReference:
    """The outputs of an op from its inputs and its spec's args; ``positive`` says
    its inputs must be drawn from a positive range (log, sqrt, power)."""

    compute: NumpyFn
    positive: bool = False


def numpy_function(spec: Mapping[str, Any]) -> Callable[..., np.ndarray]:
    """The single output of the normalised ``spec``'s op as a function of its inputs."""
    reference = NUMPY_REFERENCES.get(spec["op"])
    if reference is None:
        raise OperatorError(
            f"{spec['op']}: no numpy reference; the ops that have one are "
            f"{', '.join(sorted(NUMPY_REFERENCES))}"
        )
    args = spec["args"]
    return lambda *inputs: reference.compute(*inputs, **args)[0]


# ---- convolutions and pooling -------------------------------------------------------------


def _pair(value: IntOrPair) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else (int(value[0]), int(value[1]))


def _windows(
    padded: np.ndarray,
    kernel_hw: tuple[int, int],
    strides: IntOrPair,
    dilation: IntOrPair,
    axes: tuple[int, int],
) -> np.ndarray:
    """A view of every (dilated, strided) window: the two ``axes`` become output rows
    and columns, and two axes of kernel rows and columns are appended."""
    (sh, sw), (dh, dw) = _pair(strides), _pair(dilation)
    kh, kw = kernel_hw
    span = (dh * (kh - 1) + 1, dw * (kw - 1) + 1)
    view = sliding_window_view(padded, span, axis=axes)
    index = [slice(None)] * view.ndim
    index[axes[0]], index[axes[1]] = slice(None, None, sh), slice(None, None, sw)
    index[-2], index[-1] = slice(None, None, dh), slice(None, None, dw)
    return view[tuple(index)]


def _pad_image(
    data: np.ndarray, padding: IntOrPair, axes: tuple[int, int], value: float = 0.0
) -> np.ndarray:
    top, left, bottom, right = get_pad_tuple("numpy reference", padding)
    widths = [(0, 0)] * data.ndim
    widths[axes[0]], widths[axes[1]] = (top, bottom), (left, right)
    return np.pad(data, widths, constant_values=value)


def conv2d_nchw_im2col(
    data: np.ndarray,
    kernel: np.ndarray,
    strides: IntOrPair = 1,
    padding: IntOrPair = 0,
    dilation: IntOrPair = 1,
    groups: int = 1,
) -> np.ndarray:
    """NCHW data, OIHW kernel: im2col then one matmul per group. The columns are laid
    out (channel, ky, kx) by (output pixel), so ``kernel (O, C*KH*KW) @ columns`` gives
    the output in NCHW order directly: the im2col copy is the only one made."""
    o, per_group, kh, kw = kernel.shape
    windows = _windows(_pad_image(data, padding, (2, 3)), (kh, kw), strides, dilation, (2, 3))
    n, _, oh, ow = windows.shape[:4]
    out = np.empty((n, o, oh, ow), dtype=np.result_type(data, kernel))
    o_group = o // groups
    for g in range(groups):
        channels = windows[:, g * per_group : (g + 1) * per_group]
        columns = channels.transpose(0, 1, 4, 5, 2, 3).reshape(n, per_group * kh * kw, oh * ow)
        weights = kernel[g * o_group : (g + 1) * o_group].reshape(o_group, -1)
        out[:, g * o_group : (g + 1) * o_group] = (weights @ columns).reshape(n, o_group, oh, ow)
    return out


def conv2d_nhwc_im2col(
    data: np.ndarray,
    kernel: np.ndarray,
    strides: IntOrPair = 1,
    padding: IntOrPair = 0,
    dilation: IntOrPair = 1,
    groups: int = 1,
) -> np.ndarray:
    """NHWC data, HWIO kernel: im2col then one matmul per group; the columns are
    (output pixel) by (ky, kx, channel), so ``columns @ kernel`` is NHWC already."""
    kh, kw, per_group, o = kernel.shape
    windows = _windows(_pad_image(data, padding, (1, 2)), (kh, kw), strides, dilation, (1, 2))
    n, oh, ow = windows.shape[:3]
    out = np.empty((n, oh, ow, o), dtype=np.result_type(data, kernel))
    o_group = o // groups
    for g in range(groups):
        channels = windows[:, :, :, g * per_group : (g + 1) * per_group]
        columns = channels.transpose(0, 1, 2, 4, 5, 3).reshape(n * oh * ow, -1)
        weights = kernel[..., g * o_group : (g + 1) * o_group].reshape(-1, o_group)
        out[..., g * o_group : (g + 1) * o_group] = (columns @ weights).reshape(n, oh, ow, -1)
    return out


def _conv_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of the im2col functions from a conv spec's args."""
    return {
        "strides": args["stride"],
        "padding": args["padding"],
        "dilation": args["dilation"],
        "groups": args["groups"],
    }


# The spec's ``kernel`` arg is the window size, so the kernel array is ``weights`` here.


def _conv2d_nchw(data: np.ndarray, weights: np.ndarray, **args: Any) -> list[np.ndarray]:
    return [conv2d_nchw_im2col(data, weights, **_conv_args(args))]


def _conv2d_winograd_nchw(data: np.ndarray, weights: np.ndarray, **args: Any) -> list[np.ndarray]:
    return [conv2d_nchw_im2col(data, weights, padding=args["padding"])]


def _conv2d_nhwc(data: np.ndarray, weights: np.ndarray, **args: Any) -> list[np.ndarray]:
    return [conv2d_nhwc_im2col(data, weights, **_conv_args(args))]


def _conv2d_nchw_bias_relu(
    data: np.ndarray, weights: np.ndarray, bias: np.ndarray, **args: Any
) -> list[np.ndarray]:
    out = conv2d_nchw_im2col(data, weights, **_conv_args(args))
    return [np.maximum(out + bias[None, :, None, None], 0.0)]


def _depthwise_conv2d_nchw(
    data: np.ndarray, weights: np.ndarray, *, stride: Any, padding: Any, dilation: Any, **_: Any
) -> list[np.ndarray]:
    """Output channel ``c * multiplier + q`` is input channel c by weights[c, q]."""
    c, multiplier, kh, kw = weights.shape
    windows = _windows(_pad_image(data, padding, (2, 3)), (kh, kw), stride, dilation, (2, 3))
    out = np.einsum("nchwyx,cmyx->ncmhw", windows, weights, optimize=True)
    n, _, _, oh, ow = out.shape
    return [out.reshape(n, c * multiplier, oh, ow)]


def _max_pool2d(
    data: np.ndarray, *, kernel: Any, stride: Any, padding: Any, **_: Any
) -> list[np.ndarray]:
    padded = _pad_image(data, padding, (2, 3), -np.inf)
    return [_windows(padded, _pair(kernel), stride, 1, (2, 3)).max(axis=(4, 5))]


def _avg_pool2d(
    data: np.ndarray,
    *,
    kernel: Any,
    stride: Any,
    padding: Any,
    count_include_pad: bool,
    **_: Any,
) -> list[np.ndarray]:
    """The mean of each window; without ``count_include_pad`` the padding is not
    counted, so a border window divides by the pixels it really covers."""
    size = _pair(kernel)
    sums = _windows(_pad_image(data, padding, (2, 3)), size, stride, 1, (2, 3)).sum(axis=(4, 5))
    if count_include_pad:
        return [sums / (size[0] * size[1])]
    ones = np.ones((1, 1, *data.shape[2:]))
    counts = _windows(_pad_image(ones, padding, (2, 3)), size, stride, 1, (2, 3)).sum(axis=(4, 5))
    return [sums / counts]


def _global_avg_pool2d(data: np.ndarray, **_: Any) -> list[np.ndarray]:
    return [data.mean(axis=(2, 3), keepdims=True)]


# ---- dense algebra and activations ------------------------------------------------------


def _axes(axis: Any) -> Any:
    return tuple(axis) if isinstance(axis, list) else axis


def _matmul(
    a: np.ndarray, b: np.ndarray, *, transpose_a: bool, transpose_b: bool, **_: Any
) -> list[np.ndarray]:
    return [(a.T if transpose_a else a) @ (b.T if transpose_b else b)]


def _batch_matmul(a: np.ndarray, b: np.ndarray, **_: Any) -> list[np.ndarray]:
    return [a @ b]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


_ERF = np.frompyfunc(math.erf, 1, 1)


def _gelu(x: np.ndarray) -> np.ndarray:
    """The exact GELU, as the library computes it (numpy has no erf of its own)."""
    return 0.5 * x * (1.0 + np.asarray(_ERF(x * (1.0 / math.sqrt(2.0)))).astype(x.dtype))


_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "none": lambda x: x,
    "relu": lambda x: np.maximum(x, 0.0),
    "gelu": _gelu,
    "sigmoid": _sigmoid,
}


def _dense(
    x: np.ndarray, w: np.ndarray, *rest: np.ndarray, activation: str, **_: Any
) -> list[np.ndarray]:
    out = x @ w.T
    if rest:
        out = out + rest[0]
    return [_ACTIVATIONS[activation](out)]


def _unary(fn: Callable[[np.ndarray], np.ndarray]) -> NumpyFn:
    return lambda x, **_: [fn(x)]


def _binary(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> NumpyFn:
    return lambda a, b, **_: [fn(a, b)]


def _reduction(fn: Callable[..., np.ndarray]) -> NumpyFn:
    return lambda x, *, axis, keepdims, **_: [fn(x, axis=_axes(axis), keepdims=keepdims)]


def _softmax(x: np.ndarray, *, axis: int, **_: Any) -> list[np.ndarray]:
    shifted = np.exp(x - x.max(axis=axis, keepdims=True))
    return [shifted / shifted.sum(axis=axis, keepdims=True)]


def _log_softmax(x: np.ndarray, *, axis: int, **_: Any) -> list[np.ndarray]:
    shifted = x - x.max(axis=axis, keepdims=True)
    return [shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))]


def _layer_norm(
    x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, *, axis: Any, epsilon: float, **_: Any
) -> list[np.ndarray]:
    axes = tuple(a % x.ndim for a in (axis if isinstance(axis, list) else [axis]))
    mean = x.mean(axis=axes, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    shape = [x.shape[a] if a in axes else 1 for a in range(x.ndim)]
    scale = gamma.reshape(shape)
    return [(x - mean) / np.sqrt(variance + epsilon) * scale + beta.reshape(shape)]


# ---- data movement ------------------------------------------------------------------------


def _transpose(x: np.ndarray, *, axes: Any, **_: Any) -> list[np.ndarray]:
    return [np.ascontiguousarray(np.transpose(x, _axes(axes)))]


def _reshape(x: np.ndarray, *, newshape: list[int], **_: Any) -> list[np.ndarray]:
    return [np.reshape(x, newshape).copy()]


def _pad(
    x: np.ndarray, *, pad_before: list[int], pad_after: list[int], pad_value: float, **_: Any
) -> list[np.ndarray]:
    widths = list(zip(pad_before, pad_after, strict=True))
    return [np.pad(x, widths, constant_values=pad_value)]


def _concatenate(*inputs: np.ndarray, axis: int, **_: Any) -> list[np.ndarray]:
    return [np.concatenate(inputs, axis=axis)]


NUMPY_REFERENCES: dict[str, NumpyReference] = {
    "matmul": NumpyReference(_matmul),
    "batch_matmul": NumpyReference(_batch_matmul),
    "dense": NumpyReference(_dense),
    "conv2d_nchw": NumpyReference(_conv2d_nchw),
    "conv2d_nhwc": NumpyReference(_conv2d_nhwc),
    "conv2d_winograd_nchw": NumpyReference(_conv2d_winograd_nchw),
    "conv2d_nchw_bias_relu": NumpyReference(_conv2d_nchw_bias_relu),
    "depthwise_conv2d_nchw": NumpyReference(_depthwise_conv2d_nchw),
    "max_pool2d": NumpyReference(_max_pool2d),
    "avg_pool2d": NumpyReference(_avg_pool2d),
    "global_avg_pool2d": NumpyReference(_global_avg_pool2d),
    "relu": NumpyReference(_unary(_ACTIVATIONS["relu"])),
    "gelu": NumpyReference(_unary(_gelu)),
    "sigmoid": NumpyReference(_unary(_sigmoid)),
    "exp": NumpyReference(_unary(np.exp)),
    "log": NumpyReference(_unary(np.log), positive=True),
    "sqrt": NumpyReference(_unary(np.sqrt), positive=True),
    "tanh": NumpyReference(_unary(np.tanh)),
    "abs": NumpyReference(_unary(np.abs)),
    "negative": NumpyReference(_unary(np.negative)),
    "add": NumpyReference(_binary(np.add)),
    "subtract": NumpyReference(_binary(np.subtract)),
    "multiply": NumpyReference(_binary(np.multiply)),
    "divide": NumpyReference(_binary(np.divide)),
    "maximum": NumpyReference(_binary(np.maximum)),
    "minimum": NumpyReference(_binary(np.minimum)),
    "power": NumpyReference(_binary(np.power), positive=True),
    "sum": NumpyReference(_reduction(np.sum)),
    "max": NumpyReference(_reduction(np.max)),
    "min": NumpyReference(_reduction(np.min)),
    "mean": NumpyReference(_reduction(np.mean)),
    "softmax": NumpyReference(_softmax),
    "log_softmax": NumpyReference(_log_softmax),
    "layer_norm": NumpyReference(_layer_norm),
    "transpose": NumpyReference(_transpose),
    "reshape": NumpyReference(_reshape),
    "pad": NumpyReference(_pad),
    "concatenate": NumpyReference(_concatenate),
}
