"""3x3 stride-1 convolutions by Winograd's minimal filtering, F(m x m, 3 x 3).

Each output tile of ``m x m`` pixels comes from an input tile of ``a x a`` pixels
(``a = m + 2``) as ``Y = A^T [(G g G^T) * (B^T d B)] A`` (Lavin and Gray, "Fast
Algorithms for Convolutional Neural Networks"): the products of the ``a x a``
transformed tiles are summed over the input channels, which is ``a * a``
independent matrix products (a batched GEMM, ``bgemm``). F(2x2, 3x3) does 16
multiplications per output tile where a direct convolution does 36 (2.25x fewer);
F(4x4, 3x3) 36 where it does 144 (4x), with more rounding (about 1e-5 relative in
float32 against 1e-6).

The stages, NCHW in and out (TVM's names; ``conv2d_winograd_nchwc`` reads and writes
the blocked layout NCHW[x]c instead, the stages between are the same):

- ``kernel_pack``, ``U[e, u, ci, co] = (G g[co, ci] G^T)[e, u]``: the weight's
  transform. It only reads the kernel, so when the kernel is a placeholder its block
  is marked as that parameter's conversion (``LAYOUT_REWRITE_ATTR``): a build of a
  function whose kernel is constant runs it once per weight (``compiler.lower.prepack``).
- ``data_pack``, ``V[e, u, ci, p] = (B^T d[p, ci] B)[e, u]`` for every tile ``p``
  (batch, tile row, tile column, flattened).
- ``bgemm``, ``M[e, u, p, co] = sum over ci of V[e, u, ci, p] * U[e, u, ci, co]``:
  the output channels innermost, so its vectors run along them (a multiple of 8 in
  most networks) rather than along the tiles (49 at 14x14).
- the output, ``out[n, co, h, w] = (A^T M[:, :, p, co] A)[h % m, w % m]``.

The transforms' constant matrices are written into the expressions as selects on
the loop indices (``_weighted``): once the loops over a tile are unrolled every
select folds to one constant, and a product with a zero entry to nothing. The input
and output transforms say which loops those are (``TILE_TRANSFORM_ATTR``), for the
default schedule and the generated space (``compiler.schedule.tile_transform``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from compiler import te
from compiler.ir import expr as E
from compiler.ir.annotations import FLOPS_ATTR
from compiler.ir.expr import PrimExpr
from compiler.ir.layout_free import LAYOUT_REWRITE_ATTR
from compiler.schedule.tile_transform import TILE_TRANSFORM_ATTR
from compiler.te import PlaceholderOp, Tensor
from compiler.topi.errors import OperatorError
from compiler.topi.nn.conv2d import (
    IntOrPair,
    blocked_operand_shapes,
    operand_shapes,
    sliding_window,
)
from compiler.topi.nn.pad import pad
from compiler.topi.utils import shape_str

Matrix = tuple[tuple[Fraction, ...], ...]


def _matrix(rows: list[list[str | int]]) -> Matrix:
    return tuple(tuple(Fraction(v) for v in row) for row in rows)


# (A^T, G, B^T) of F(m x m, 3 x 3) by the output tile size m: Lavin and Gray's
# interpolation points 0, 1, -1 (m = 2) and 0, 1, -1, 2, -2 (m = 4), and infinity.
WINOGRAD_MATRICES: dict[int, tuple[Matrix, Matrix, Matrix]] = {
    2: (
        _matrix([[1, 1, 1, 0], [0, 1, -1, -1]]),
        _matrix([[1, 0, 0], ["1/2", "1/2", "1/2"], ["1/2", "-1/2", "1/2"], [0, 0, 1]]),
        _matrix([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]),
    ),
    4: (
        _matrix(
            [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]
        ),
        _matrix(
            [
                ["1/4", 0, 0],
                ["-1/6", "-1/6", "-1/6"],
                ["-1/6", "1/6", "-1/6"],
                ["1/24", "1/12", "1/6"],
                ["1/24", "-1/12", "1/6"],
                [0, 0, 1],
            ]
        ),
        _matrix(
            [
                [4, 0, -5, 0, 1, 0],
                [0, -4, -4, 1, 1, 0],
                [0, 4, -4, -1, 1, 0],
                [0, -2, -1, 2, 1, 0],
                [0, 2, -1, -2, 1, 0],
                [0, 4, 0, -5, 0, 1],
            ]
        ),
    ),
}
WINOGRAD_TILE_SIZES = tuple(WINOGRAD_MATRICES)


def winograd_applies(
    kernel_shape: tuple[int, ...], stride: IntOrPair, dilation: IntOrPair, groups: int
) -> bool:
    """Whether a conv2d_nchw of this OIHW kernel shape has a Winograd form: a 3x3
    kernel, stride 1, no dilation, one group."""
    return (
        len(kernel_shape) == 4
        and tuple(kernel_shape[2:]) == (3, 3)
        and _pair(stride) == (1, 1)
        and _pair(dilation) == (1, 1)
        and groups == 1
    )


def _pair(value: IntOrPair) -> tuple[int, ...]:
    return (value, value) if isinstance(value, int) else tuple(value)


_Element = Callable[[PrimExpr, PrimExpr, PrimExpr, PrimExpr], PrimExpr]
# The image's rows and columns: axes 2 and 3 of the data and the output in both layouts.
_IMAGE_AXES = (2, 3)


@dataclass(frozen=True)
class _Layout:
    """Where a Winograd convolution reads its data and kernel elements and writes its
    output: NCHW and OIHW, or the blocked NCHW[x]c and OIHW[i]i[o]o."""

    op: str
    batch: int
    channels: int
    out_channels: int
    height: int
    width: int
    read_data: Callable[[Tensor, PrimExpr, PrimExpr, PrimExpr, PrimExpr], PrimExpr]
    read_kernel: Callable[[PrimExpr, PrimExpr, PrimExpr, PrimExpr], PrimExpr]
    # the output's shape from (batch, out height, out width), and its compute
    # function from that of the element (n, co, y, x)
    out_shape: Callable[[int, int, int], tuple[int, ...]]
    out_compute: Callable[[_Element], Callable[..., PrimExpr]]
    # whether the output has axes after the image's (a channel block), which the
    # output transform's annotation must then name
    blocked: bool


def conv2d_winograd_nchw(
    data: Tensor, kernel: Tensor, padding: IntOrPair = 0, tile_size: int = 2
) -> Tensor:
    """data (N, C, H, W) * kernel (O, C, 3, 3) -> (N, O, OH, OW), stride 1, computed
    by F(tile_size x tile_size, 3 x 3); equal to ``conv2d_nchw(data, kernel,
    padding=padding)`` up to rounding."""
    op = "conv2d_winograd_nchw"
    data_shape, kernel_shape = operand_shapes(op, data, kernel, 4, 4)
    batch, channels, height, width = data_shape
    out_channels, kernel_channels, kh, kw = kernel_shape
    _check_kernel(op, kernel, (kh, kw), kernel_channels, channels)
    layout = _Layout(
        op,
        batch,
        channels,
        out_channels,
        height,
        width,
        read_data=lambda src, n, ci, row, col: src[n, ci, row, col],
        read_kernel=lambda co, ci, r, s: kernel[co, ci, r, s],
        out_shape=lambda n, oh, ow: (n, out_channels, oh, ow),
        out_compute=lambda element: element,
        blocked=False,
    )
    return _winograd(data, kernel, padding, tile_size, layout)


def conv2d_winograd_nchwc(
    data: Tensor, kernel: Tensor, padding: IntOrPair = 0, tile_size: int = 2
) -> Tensor:
    """data (N, C/i, H, W, i) * kernel (O/o, C/i, 3, 3, i, o) -> (N, O/o, OH, OW, o),
    stride 1: ``conv2d_nchwc`` by F(tile_size x tile_size, 3 x 3), so a blocked model
    keeps its layout through a Winograd convolution. The transforms and the batched
    GEMM are those of ``conv2d_winograd_nchw``; only where they read and write moves."""
    op = "conv2d_winograd_nchwc"
    data_shape, kernel_shape = blocked_operand_shapes(op, data, kernel)
    batch, blocks, height, width, block = data_shape
    out_blocks, _, kh, kw, _, out_block = kernel_shape
    _check_kernel(op, kernel, (kh, kw), blocks * block, blocks * block)
    layout = _Layout(
        op,
        batch,
        blocks * block,
        out_blocks * out_block,
        height,
        width,
        read_data=lambda src, n, ci, row, col: src[n, ci // block, row, col, ci % block],
        read_kernel=lambda co, ci, r, s: kernel[
            co // out_block, ci // block, r, s, ci % block, co % out_block
        ],
        out_shape=lambda n, oh, ow: (n, out_blocks, oh, ow, out_block),
        out_compute=lambda element: lambda n, cb, y, x, c: element(n, cb * out_block + c, y, x),
        blocked=True,
    )
    return _winograd(data, kernel, padding, tile_size, layout)


def _check_kernel(
    op: str, kernel: Tensor, window: tuple[int, int], kernel_channels: int, channels: int
) -> None:
    if window != (3, 3) or kernel_channels != channels:
        raise OperatorError(
            f"{op}: needs a 3x3 kernel over all {channels} input channels, got kernel "
            f"{shape_str(kernel)}; use {op.replace('_winograd', '')} for other kernels"
        )


def _winograd(
    data: Tensor, kernel: Tensor, padding: IntOrPair, tile_size: int, layout: _Layout
) -> Tensor:
    """The four stages of the module docstring, reading and writing in ``layout``."""
    op = layout.op
    if tile_size not in WINOGRAD_MATRICES:
        raise OperatorError(
            f"{op}: tile_size {tile_size!r} is not one of {list(WINOGRAD_TILE_SIZES)}"
        )
    channels, out_channels = layout.channels, layout.out_channels
    batch = layout.batch
    win = sliding_window(op, (layout.height, layout.width), (3, 3), 1, padding, 1)
    m = tile_size
    a_t, g, b_t = WINOGRAD_MATRICES[m]
    alpha = m + 2
    tiles_h, tiles_w = -(-win.out_height // m), -(-win.out_width // m)
    tiles = tiles_h * tiles_w
    # Pad below and right as far as the last tile reads, past the image if need be.
    bottom = tiles_h * m + 2 - layout.height - win.pad_top
    right = tiles_w * m + 2 - layout.width - win.pad_left
    source = data
    if any((win.pad_top, win.pad_left, bottom, right)):
        before, after = [0] * data.ndim, [0] * data.ndim
        rows, cols = _IMAGE_AXES
        before[rows], before[cols], after[rows], after[cols] = (
            win.pad_top,
            win.pad_left,
            bottom,
            right,
        )
        source = pad(data, before, after, 0)
    dtype = data.dtype

    r = te.reduce_axis((0, 3), name="r")
    s = te.reduce_axis((0, 3), name="s")
    attrs = {LAYOUT_REWRITE_ATTR: True} if isinstance(kernel.op, PlaceholderOp) else None
    kernel_pack = te.compute(
        (alpha, alpha, channels, out_channels),
        lambda e, u, ci, co: te.sum(
            _weighted(
                layout.read_kernel(co, ci, r.var, s.var), [(g, e, r.var), (g, u, s.var)], dtype
            ),
            axis=[r, s],
        ),
        name="kernel_pack",
        attrs=attrs,
    )

    ra = te.reduce_axis((0, alpha), name="ra")
    rb = te.reduce_axis((0, alpha), name="rb")

    def data_element(e: PrimExpr, u: PrimExpr, ci: PrimExpr, p: PrimExpr) -> PrimExpr:
        n, tile = p // tiles, p % tiles
        row, col = tile // tiles_w * m + ra.var, tile % tiles_w * m + rb.var
        value = layout.read_data(source, n, ci, row, col)
        return te.sum(_weighted(value, [(b_t, e, ra.var), (b_t, u, rb.var)], dtype), axis=[ra, rb])

    data_pack = te.compute(
        (alpha, alpha, channels, batch * tiles),
        data_element,
        name="data_pack",
        attrs={TILE_TRANSFORM_ATTR: [0, 1], FLOPS_ATTR: 0},
    )

    rc = te.reduce_axis((0, channels), name="rc")
    bgemm = te.compute(
        (alpha, alpha, batch * tiles, out_channels),
        lambda e, u, p, co: te.sum(data_pack[e, u, rc, p] * kernel_pack[e, u, rc, co], axis=rc),
        name="bgemm",
        attrs={FLOPS_ATTR: 0},
    )

    ea = te.reduce_axis((0, alpha), name="ea")
    eb = te.reduce_axis((0, alpha), name="eb")

    def output_element(n: PrimExpr, co: PrimExpr, y: PrimExpr, x: PrimExpr) -> PrimExpr:
        p = n * tiles + y // m * tiles_w + x // m
        value = bgemm[ea, eb, p, co]
        return te.sum(
            _weighted(value, [(a_t, y % m, ea.var), (a_t, x % m, eb.var)], dtype), axis=[ea, eb]
        )

    tile_spec: dict[str, object] = {"tile": m}
    if layout.blocked:
        tile_spec["axes"] = list(_IMAGE_AXES)
    return te.compute(
        layout.out_shape(batch, win.out_height, win.out_width),
        layout.out_compute(output_element),
        name=op,
        attrs={
            TILE_TRANSFORM_ATTR: tile_spec,
            FLOPS_ATTR: 2 * channels * 9,
        },
    )


def _weighted(
    value: PrimExpr, factors: list[tuple[Matrix, PrimExpr, PrimExpr]], dtype: str
) -> PrimExpr:
    """``value * matrix[row, col] * ...`` for the constant matrices ``factors``, as
    selects on the indices. A zero coefficient gives -0.0 (adding it is exactly no
    addition, so LLVM drops it once the selects fold), a coefficient of 1 the value
    itself."""
    product = value
    nonzero: PrimExpr | None = None
    for matrix, row, col in factors:
        product = product * _lookup(matrix, row, col, lambda v: E.const(float(v), dtype))
        here = _lookup(matrix, row, col, lambda v: E.const(v != 0, "bool"))
        nonzero = here if nonzero is None else E.And(nonzero, here)
    assert nonzero is not None
    return te.if_then_else(nonzero, product, E.const(-0.0, dtype))


def _lookup(
    matrix: Matrix, row: PrimExpr, col: PrimExpr, leaf: Callable[[Fraction], PrimExpr]
) -> PrimExpr:
    """``leaf(matrix[row, col])`` as selects on the row, then on the column: with
    constant indices the code generator emits only the compares on the way to one
    entry."""
    by_row: PrimExpr | None = None
    for i in reversed(range(len(matrix))):
        by_col: PrimExpr | None = None
        for j in reversed(range(len(matrix[i]))):
            entry = leaf(matrix[i][j])
            by_col = entry if by_col is None else E.Select(_is(col, j), entry, by_col)
        assert by_col is not None
        by_row = by_col if by_row is None else E.Select(_is(row, i), by_col, by_row)
    assert by_row is not None
    return by_row


def _is(index: PrimExpr, value: int) -> PrimExpr:
    return E.EQ(index, E.const(value, index.dtype))
