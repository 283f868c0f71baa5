"""The numpy references of ``compiler.topi.reference``: the im2col convolution against
the convolution's definition, on random shapes with strides, padding and dilation.
(Every reference is also checked against the unscheduled build in test_workers.)"""

from __future__ import annotations

import numpy as np
import pytest

from compiler.topi import OperatorError
from compiler.topi.reference import conv2d_nchw_im2col, numpy_function


def naive_conv2d_nchw(
    data: np.ndarray,
    kernel: np.ndarray,
    strides: tuple[int, int],
    padding: tuple[int, int, int, int],
    dilation: tuple[int, int],
) -> np.ndarray:
    """The definition, one output pixel at a time."""
    (sh, sw), (dh, dw) = strides, dilation
    top, left, bottom, right = padding
    padded = np.pad(data, ((0, 0), (0, 0), (top, bottom), (left, right)))
    o, _, kh, kw = kernel.shape
    n, _, h, w = padded.shape
    oh = (h - dh * (kh - 1) - 1) // sh + 1
    ow = (w - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, o, oh, ow))
    for y in range(oh):
        for x in range(ow):
            rows = slice(y * sh, y * sh + dh * (kh - 1) + 1, dh)
            cols = slice(x * sw, x * sw + dw * (kw - 1) + 1, dw)
            window = padded[:, :, rows, cols]
            out[:, :, y, x] = np.einsum("ncyx,ocyx->no", window, kernel)
    return out


@pytest.mark.parametrize("seed", range(12))
def test_im2col_conv2d_is_the_definition(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, c, o = rng.integers(1, 4), rng.integers(1, 5), rng.integers(1, 6)
    kh, kw = rng.integers(1, 4, 2)
    strides = tuple(int(s) for s in rng.integers(1, 3, 2))
    dilation = tuple(int(d) for d in rng.integers(1, 3, 2))
    padding = tuple(int(p) for p in rng.integers(0, 3, 4))
    h = int(rng.integers(dilation[0] * (kh - 1) + 1, 12))
    w = int(rng.integers(dilation[1] * (kw - 1) + 1, 12))
    data = rng.standard_normal((n, c, h, w))
    kernel = rng.standard_normal((o, c, kh, kw))
    got = conv2d_nchw_im2col(data, kernel, strides, padding, dilation)
    want = naive_conv2d_nchw(data, kernel, strides, padding, dilation)  # type: ignore[arg-type]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert got.flags.c_contiguous


def test_an_op_without_a_reference_is_named() -> None:
    with pytest.raises(OperatorError, match="no numpy reference; the ops that have one are"):
        numpy_function({"op": "fft", "args": {}})
