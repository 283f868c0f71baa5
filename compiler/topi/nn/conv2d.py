"""2-D convolutions: NCHW (OIHW kernel), NHWC (HWIO kernel), depthwise NCHW, NCHW with
bias and relu fused, and the blocked NCHW[x]c (TVM's ``conv2d_NCHWc`` for x86: the
channels split into blocks of ``c``, innermost, so a kernel writes ``c`` consecutive
output channels of one pixel with one vector whatever the image size, where NCHW's
rows of a 7x7 map give vectors of 7).

Every variant takes ``stride``, ``padding`` and ``dilation`` as an int or a pair
(height, width); ``padding`` may also be four ints (top, left, bottom, right), as
in TVM. Padding is a separate ``PadInput`` compute (see ``pad``), absent when all
widths are zero. ``groups`` splits the channels into independent convolutions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from compiler import te
from compiler.ir import expr as E
from compiler.ir.expr import PrimExpr
from compiler.ir.stmt import IterVar
from compiler.te import Tensor
from compiler.topi.errors import OperatorError
from compiler.topi.nn.pad import pad
from compiler.topi.utils import (
    check_int,
    check_same_dtype,
    check_tensor,
    int_tuple,
    shape_str,
    static_shape,
)

IntOrPair = int | Sequence[int]


@dataclass(frozen=True)
class Window:
    """A sliding window over (height, width): its strides, paddings and output size."""

    stride: tuple[int, int]
    dilation: tuple[int, int]
    pad_top: int
    pad_left: int
    pad_bottom: int
    pad_right: int
    out_height: int
    out_width: int

    @property
    def padded(self) -> bool:
        return any((self.pad_top, self.pad_left, self.pad_bottom, self.pad_right))

    def source_index(
        self, y: PrimExpr, x: PrimExpr, ry: PrimExpr, rx: PrimExpr
    ) -> tuple[PrimExpr, PrimExpr]:
        """The (row, column) of the (padded) input that output (y, x) reads at window
        offset (ry, rx)."""
        (sh, sw), (dh, dw) = self.stride, self.dilation
        return window_index(y, sh, ry, dh), window_index(x, sw, rx, dw)

    def pad_widths(self, height_axis: int, ndim: int) -> tuple[list[int], list[int]]:
        """pad_before and pad_after for a tensor with height at ``height_axis``."""
        before = [0] * ndim
        after = [0] * ndim
        before[height_axis : height_axis + 2] = [self.pad_top, self.pad_left]
        after[height_axis : height_axis + 2] = [self.pad_bottom, self.pad_right]
        return before, after


def get_pad_tuple(op: str, padding: IntOrPair) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) from an int, a pair (height, width) or four ints."""
    if isinstance(padding, Sequence) and len(padding) == 4:
        top, left, bottom, right = int_tuple(op, "padding", padding, 4, minimum=0)
        return top, left, bottom, right
    pad_h, pad_w = int_tuple(op, "padding", padding, 2, minimum=0)
    return pad_h, pad_w, pad_h, pad_w


def sliding_window(
    op: str,
    size: tuple[int, int],
    kernel: tuple[int, int],
    stride: IntOrPair,
    padding: IntOrPair,
    dilation: IntOrPair,
) -> Window:
    """The window over an image of ``size`` with a ``kernel``; checks it fits."""
    strides = int_tuple(op, "stride", stride, 2, minimum=1)
    dilations = int_tuple(op, "dilation", dilation, 2, minimum=1)
    top, left, bottom, right = get_pad_tuple(op, padding)
    out = []
    for axis, pads, extent, k, s, d in (
        ("height", top + bottom, size[0], kernel[0], strides[0], dilations[0]),
        ("width", left + right, size[1], kernel[1], strides[1], dilations[1]),
    ):
        span = (k - 1) * d + 1
        if span > extent + pads:
            raise OperatorError(
                f"{op}: the {axis} of the dilated kernel ({span}) exceeds the padded input "
                f"({extent} + {pads} padding)"
            )
        out.append((extent + pads - span) // s + 1)
    return Window(
        (strides[0], strides[1]),
        (dilations[0], dilations[1]),
        top,
        left,
        bottom,
        right,
        out[0],
        out[1],
    )


def _check_groups(op: str, groups: int, channels: int, out_channels: int) -> None:
    check_int(op, "groups", groups, minimum=1)
    if channels % groups:
        raise OperatorError(f"{op}: channels {channels} not divisible by groups {groups}")
    if out_channels % groups:
        raise OperatorError(f"{op}: out channels {out_channels} not divisible by groups {groups}")


def _check_kernel_channels(
    op: str, kernel: Tensor, per_group: int, channels: int, groups: int
) -> None:
    if per_group != channels // groups:
        raise OperatorError(
            f"{op}: kernel {shape_str(kernel)} has {per_group} input channels but data has "
            f"{channels} channels in {groups} group(s) (expected {channels // groups})"
        )


def operand_shapes(
    op: str, data: Tensor, kernel: Tensor, data_ndim: int, kernel_ndim: int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The static shapes of a convolution's data and kernel, checked: their ranks, one
    dtype."""
    check_tensor(op, "data", data, ndim=data_ndim)
    check_tensor(op, "kernel", kernel, ndim=kernel_ndim)
    check_same_dtype(op, {"data": data, "kernel": kernel})
    return static_shape(op, "data", data), static_shape(op, "kernel", kernel)


def _input_channel(
    groups: int, out_channel: PrimExpr, out_per_group: int, in_per_group: int, rc: PrimExpr
) -> PrimExpr:
    if groups == 1:
        return rc
    return out_channel // out_per_group * in_per_group + rc


def conv2d_nchw(
    data: Tensor,
    kernel: Tensor,
    stride: IntOrPair = 1,
    padding: IntOrPair = 0,
    dilation: IntOrPair = 1,
    groups: int = 1,
) -> Tensor:
    """data (N, C, H, W) * kernel (O, C/groups, KH, KW) -> (N, O, OH, OW)."""
    op = "conv2d_nchw"
    data_shape, kernel_shape = operand_shapes(op, data, kernel, 4, 4)
    _, channels, height, width = data_shape
    out_channels, per_group, kh, kw = kernel_shape
    _check_groups(op, groups, channels, out_channels)
    _check_kernel_channels(op, kernel, per_group, channels, groups)
    win = sliding_window(op, (height, width), (kh, kw), stride, padding, dilation)
    source = _padded(data, win, height_axis=2)
    rc = te.reduce_axis((0, per_group), name="rc")
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    out_per_group = out_channels // groups

    def element(n: PrimExpr, o: PrimExpr, y: PrimExpr, x: PrimExpr) -> PrimExpr:
        c = _input_channel(groups, o, out_per_group, per_group, rc.var)
        row, col = win.source_index(y, x, ry.var, rx.var)
        value = source[n, c, row, col] * kernel[o, rc, ry, rx]
        return te.sum(value, axis=[rc, ry, rx])

    shape = (data.shape[0], out_channels, win.out_height, win.out_width)
    return te.compute(shape, element, name="conv2d_nchw")


def conv2d_nhwc(
    data: Tensor,
    kernel: Tensor,
    stride: IntOrPair = 1,
    padding: IntOrPair = 0,
    dilation: IntOrPair = 1,
    groups: int = 1,
) -> Tensor:
    """data (N, H, W, C) * kernel (KH, KW, C/groups, O) -> (N, OH, OW, O)."""
    op = "conv2d_nhwc"
    data_shape, kernel_shape = operand_shapes(op, data, kernel, 4, 4)
    _, height, width, channels = data_shape
    kh, kw, per_group, out_channels = kernel_shape
    _check_groups(op, groups, channels, out_channels)
    _check_kernel_channels(op, kernel, per_group, channels, groups)
    win = sliding_window(op, (height, width), (kh, kw), stride, padding, dilation)
    source = _padded(data, win, height_axis=1)
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    rc = te.reduce_axis((0, per_group), name="rc")
    out_per_group = out_channels // groups

    def element(n: PrimExpr, y: PrimExpr, x: PrimExpr, o: PrimExpr) -> PrimExpr:
        c = _input_channel(groups, o, out_per_group, per_group, rc.var)
        row, col = win.source_index(y, x, ry.var, rx.var)
        value = source[n, row, col, c] * kernel[ry, rx, rc, o]
        return te.sum(value, axis=[ry, rx, rc])

    shape = (data.shape[0], win.out_height, win.out_width, out_channels)
    return te.compute(shape, element, name="conv2d_nhwc")


def depthwise_conv2d_nchw(
    data: Tensor,
    kernel: Tensor,
    stride: IntOrPair = 1,
    padding: IntOrPair = 0,
    dilation: IntOrPair = 1,
) -> Tensor:
    """data (N, C, H, W) * kernel (C, M, KH, KW) -> (N, C*M, OH, OW).

    Output channel ``c*M + m`` filters input channel ``c`` with ``kernel[c, m]``
    (TVM's layout; ``M`` is the channel multiplier).
    """
    op = "depthwise_conv2d_nchw"
    data_shape, kernel_shape = operand_shapes(op, data, kernel, 4, 4)
    _, channels, height, width = data_shape
    kernel_channels, multiplier, kh, kw = kernel_shape
    if kernel_channels != channels:
        raise OperatorError(
            f"{op}: kernel {shape_str(kernel)} is for {kernel_channels} channels but data "
            f"has {channels}"
        )
    win, source, ry, rx = _window_over(
        op, data, (height, width), (kh, kw), stride, padding, dilation
    )

    def element(n: PrimExpr, o: PrimExpr, y: PrimExpr, x: PrimExpr) -> PrimExpr:
        c, m = (o // multiplier, o % multiplier) if multiplier > 1 else (o, E.const(0))
        row, col = win.source_index(y, x, ry.var, rx.var)
        value = source[n, c, row, col] * kernel[c, m, ry, rx]
        return te.sum(value, axis=[ry, rx])

    shape = (data.shape[0], channels * multiplier, win.out_height, win.out_width)
    return te.compute(shape, element, name="depthwise_conv2d_nchw")


def depthwise_conv2d_nchwc(
    data: Tensor,
    kernel: Tensor,
    stride: IntOrPair = 1,
    padding: IntOrPair = 0,
    dilation: IntOrPair = 1,
) -> Tensor:
    """data (N, C/b, H, W, b) * kernel (C/b, KH, KW, b) -> (N, C/b, OH, OW, b): the
    blocked ``depthwise_conv2d_nchw`` of multiplier 1, each channel filtered by its
    own window, so a blocked model keeps its layout through a depthwise convolution."""
    op = "depthwise_conv2d_nchwc"
    data_shape, kernel_shape = operand_shapes(op, data, kernel, 5, 4)
    _, blocks, height, width, block = data_shape
    kernel_blocks, kh, kw, kernel_block = kernel_shape
    if (kernel_blocks, kernel_block) != (blocks, block):
        raise OperatorError(
            f"{op}: kernel {shape_str(kernel)} filters {kernel_blocks} blocks of "
            f"{kernel_block} channels, data {shape_str(data)} has {blocks} blocks of {block}"
        )
    win, source, ry, rx = _window_over(
        op, data, (height, width), (kh, kw), stride, padding, dilation
    )

    def element(n: PrimExpr, cb: PrimExpr, y: PrimExpr, x: PrimExpr, c: PrimExpr) -> PrimExpr:
        row, col = win.source_index(y, x, ry.var, rx.var)
        return te.sum(source[n, cb, row, col, c] * kernel[cb, ry, rx, c], axis=[ry, rx])

    shape = (data.shape[0], blocks, win.out_height, win.out_width, block)
    return te.compute(shape, element, name=op)


def conv2d_nchw_bias_relu(
    data: Tensor,
    kernel: Tensor,
    bias: Tensor,
    stride: IntOrPair = 1,
    padding: IntOrPair = 0,
    dilation: IntOrPair = 1,
    groups: int = 1,
) -> Tensor:
    """``relu(conv2d_nchw(data, kernel) + bias[None, :, None, None])``; bias is (O,).

    Bias and relu are one elementwise compute after the convolution, the fused
    epilogue a schedule inlines into the convolution's output loop.
    """
    op = "conv2d_nchw_bias_relu"
    check_tensor(op, "bias", bias, ndim=1)
    check_tensor(op, "kernel", kernel, ndim=4)
    check_same_dtype(op, {"kernel": kernel, "bias": bias})
    out_channels = static_shape(op, "kernel", kernel)[0]
    if static_shape(op, "bias", bias)[0] != out_channels:
        raise OperatorError(
            f"{op}: bias has shape {shape_str(bias)} but kernel has {out_channels} output channels"
        )
    conv = conv2d_nchw(data, kernel, stride, padding, dilation, groups)
    zero = E.const(0, conv.dtype)
    return te.compute(
        conv.shape,
        lambda n, o, y, x: te.max(conv[n, o, y, x] + bias[o], zero),
        name="T_conv2d_bias_relu",
    )


def _window_over(
    op: str,
    data: Tensor,
    size: tuple[int, int],
    window: tuple[int, int],
    stride: IntOrPair,
    padding: IntOrPair,
    dilation: IntOrPair,
) -> tuple[Window, Tensor, IterVar, IterVar]:
    """A depthwise window over image axes 2 and 3: its geometry, the padded data and
    the reduce axes over its rows and columns."""
    win = sliding_window(op, size, window, stride, padding, dilation)
    ry = te.reduce_axis((0, window[0]), name="ry")
    rx = te.reduce_axis((0, window[1]), name="rx")
    return win, _padded(data, win, height_axis=2), ry, rx


def _padded(data: Tensor, win: Window, height_axis: int) -> Tensor:
    if not win.padded:
        return data
    before, after = win.pad_widths(height_axis, data.ndim)
    return pad(data, before, after, 0)


def window_index(out: PrimExpr, stride: int, offset: PrimExpr, dilation: int) -> PrimExpr:
    """``out * stride + offset * dilation``, leaving out factors of 1 so the loads stay
    plain sums of loop variables wherever the layout allows."""
    start = out * stride if stride != 1 else out
    return start + (offset * dilation if dilation != 1 else offset)


def blocked_operand_shapes(
    op: str, data: Tensor, kernel: Tensor
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The shapes of blocked data (N, C/i, H, W, i) and kernel (O/o, C/i, KH, KW, i, o),
    checked to agree on the input channels' blocks."""
    data_shape, kernel_shape = operand_shapes(op, data, kernel, 5, 6)
    _, blocks, _, _, block = data_shape
    _, kernel_blocks, _, _, kernel_block, _ = kernel_shape
    if (kernel_blocks, kernel_block) != (blocks, block):
        raise OperatorError(
            f"{op}: kernel {shape_str(kernel)} reads {kernel_blocks} blocks of {kernel_block} "
            f"input channels, data {shape_str(data)} has {blocks} blocks of {block}"
        )
    return data_shape, kernel_shape


def conv2d_nchwc(
    data: Tensor,
    kernel: Tensor,
    stride: IntOrPair = 1,
    padding: IntOrPair = 0,
    dilation: IntOrPair = 1,
) -> Tensor:
    """data (N, C/ic, H, W, ic) * kernel (O/oc, C/ic, KH, KW, ic, oc) -> (N, O/oc, OH, OW, oc)."""
    op = "conv2d_nchwc"
    data_shape, kernel_shape = blocked_operand_shapes(op, data, kernel)
    _, blocks, height, width, block = data_shape
    out_blocks, _, kh, kw, _, out_block = kernel_shape
    win = sliding_window(op, (height, width), (kh, kw), stride, padding, dilation)
    source = _padded(data, win, height_axis=2)
    rco = te.reduce_axis((0, blocks), name="rco")
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    rci = te.reduce_axis((0, block), name="rci")

    def element(n: PrimExpr, oo: PrimExpr, y: PrimExpr, x: PrimExpr, oi: PrimExpr) -> PrimExpr:
        row, col = win.source_index(y, x, ry.var, rx.var)
        value = source[n, rco, row, col, rci] * kernel[oo, rco, ry, rx, rci, oi]
        return te.sum(value, axis=[rco, ry, rx, rci])

    shape = (data.shape[0], out_blocks, win.out_height, win.out_width, out_block)
    return te.compute(shape, element, name="conv2d_nchwc")
