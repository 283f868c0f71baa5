"""2-D pooling over NCHW data, or blocked NCHW[x]c data (N, C/x, H, W, x), whose
channel block passes through: max, average and global average.

Each padding side must be smaller than the kernel on its axis, so every window
holds at least one real element. ``avg_pool2d`` divides by the number of real
(non-padding) elements in the window unless ``count_include_pad=True``, which
divides by the full kernel size (PyTorch's and TVM's default); the default here
is ONNX's and Keras's, where a padded border does not pull averages towards zero.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from compiler import te
from compiler.ir import expr as E
from compiler.ir.expr import PrimExpr
from compiler.te import Tensor
from compiler.topi.errors import OperatorError
from compiler.topi.nn.conv2d import IntOrPair, Window, sliding_window
from compiler.topi.nn.pad import pad
from compiler.topi.reduction import element_count
from compiler.topi.utils import (
    check_bool,
    check_float,
    check_tensor,
    int_tuple,
    shape_str,
    static_shape,
)


def max_pool2d(
    data: Tensor, kernel: IntOrPair, stride: IntOrPair = 1, padding: IntOrPair = 0
) -> Tensor:
    """The maximum over each ``kernel`` window; padding never wins (it is -inf)."""
    op = "max_pool2d"
    win, (kh, kw) = _window(op, data, kernel, stride, padding)
    source = _padded(data, win, te.min_value(data.dtype))
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")

    def element(n: PrimExpr, c: PrimExpr, y: PrimExpr, x: PrimExpr, *block: PrimExpr) -> PrimExpr:
        row, col = win.source_index(y, x, ry.var, rx.var)
        return te.max(source[(n, c, row, col, *block)], axis=[ry, rx])

    return _image_compute(_out_shape(data, win), element, "pool_max")


def avg_pool2d(
    data: Tensor,
    kernel: IntOrPair,
    stride: IntOrPair = 1,
    padding: IntOrPair = 0,
    count_include_pad: bool = False,
) -> Tensor:
    """The mean over each ``kernel`` window (see the module note on padding)."""
    op = "avg_pool2d"
    check_bool(op, "count_include_pad", count_include_pad)
    win, (kh, kw) = _window(op, data, kernel, stride, padding)
    check_float(op, "data", data)
    source = _padded(data, win, 0)
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")

    def window_sum(
        n: PrimExpr, c: PrimExpr, y: PrimExpr, x: PrimExpr, *block: PrimExpr
    ) -> PrimExpr:
        row, col = win.source_index(y, x, ry.var, rx.var)
        return te.sum(source[(n, c, row, col, *block)], axis=[ry, rx])

    total = _image_compute(_out_shape(data, win), window_sum, "pool_sum")
    if count_include_pad or not win.padded:
        full = E.const(kh * kw, data.dtype)
        return _image_compute(total.shape, lambda *i: total[i] / full, "pool_avg")
    height, width = static_shape(op, "data", data)[2:4]
    sh, sw = win.stride

    def average(n: PrimExpr, c: PrimExpr, y: PrimExpr, x: PrimExpr, *block: PrimExpr) -> PrimExpr:
        rows = _valid(y, sh, win.pad_top, kh, height)
        cols = _valid(x, sw, win.pad_left, kw, width)
        return total[(n, c, y, x, *block)] / te.cast(data.dtype, rows * cols)

    return _image_compute(total.shape, average, "pool_avg")


def global_avg_pool2d(data: Tensor) -> Tensor:
    """The mean over height and width: (N, C, H, W) -> (N, C, 1, 1), or blocked
    (N, C/x, H, W, x) -> (N, C/x, 1, 1, x)."""
    op = "global_avg_pool2d"
    _check_image(op, data)
    check_float(op, "data", data)
    ry = te.reduce_axis((0, data.shape[2]), name="ry")
    rx = te.reduce_axis((0, data.shape[3]), name="rx")
    shape: tuple[PrimExpr | int, ...] = (data.shape[0], data.shape[1], 1, 1, *data.shape[4:])

    def window_sum(
        n: PrimExpr, c: PrimExpr, y: PrimExpr, x: PrimExpr, *block: PrimExpr
    ) -> PrimExpr:
        return te.sum(data[(n, c, ry, rx, *block)], axis=[ry, rx])

    total = _image_compute(shape, window_sum, "global_pool_sum")
    count = element_count(data, (2, 3))
    return _image_compute(shape, lambda *i: total[i] / count, "global_pool_avg")


def _check_image(op: str, data: Tensor) -> None:
    check_tensor(op, "data", data)
    if data.ndim not in (4, 5):
        raise OperatorError(
            f"{op}: data must be NCHW (4 dimensions) or blocked NCHW[x]c (5), got "
            f"{data.ndim} dimensions (shape {shape_str(data)})"
        )


def _image_compute(
    shape: Sequence[PrimExpr | int], element: Callable[..., PrimExpr], name: str
) -> Tensor:
    """``te.compute`` of an NCHW or a blocked image, its axes named n, c, y, x and, when
    blocked, b: ``element(n, c, y, x)`` or ``element(n, c, y, x, b)``."""
    if len(shape) == 4:
        return te.compute(shape, lambda n, c, y, x: element(n, c, y, x), name=name)
    return te.compute(shape, lambda n, c, y, x, b: element(n, c, y, x, b), name=name)


def _window(
    op: str, data: Tensor, kernel: IntOrPair, stride: IntOrPair, padding: IntOrPair
) -> tuple[Window, tuple[int, int]]:
    _check_image(op, data)
    height, width = static_shape(op, "data", data)[2:4]
    kh, kw = int_tuple(op, "kernel", kernel, 2, minimum=1)
    win = sliding_window(op, (height, width), (kh, kw), stride, padding, 1)
    for side, pad_width, k in (
        ("top", win.pad_top, kh),
        ("left", win.pad_left, kw),
        ("bottom", win.pad_bottom, kh),
        ("right", win.pad_right, kw),
    ):
        if pad_width >= k:
            raise OperatorError(
                f"{op}: padding {side} {pad_width} must be smaller than the kernel ({k}); "
                "a window would hold only padding"
            )
    return win, (kh, kw)


def _out_shape(data: Tensor, win: Window) -> tuple[PrimExpr | int, ...]:
    return (data.shape[0], data.shape[1], win.out_height, win.out_width, *data.shape[4:])


def _padded(data: Tensor, win: Window, value: float | PrimExpr) -> Tensor:
    if not win.padded:
        return data
    before, after = win.pad_widths(2, data.ndim)
    return pad(data, before, after, value)


def _valid(out: PrimExpr, stride: int, pad_before: int, kernel: int, extent: int) -> PrimExpr:
    """How many of the ``kernel`` input positions under output ``out`` are real."""
    first = out * stride if stride != 1 else out
    start = first - pad_before if pad_before else first
    end = first + (kernel - pad_before)
    return te.min(end, extent) - te.max(start, 0)
