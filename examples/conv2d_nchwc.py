"""conv2d in the blocked NCHW[16]c layout, scheduled by hand.

    python examples/conv2d_nchwc.py            # 1x64x56x56, 64 3x3 filters, pad 1
    python examples/conv2d_nchwc.py --small    # a quick check

onnxruntime's CPU conv reaches most of the FMA peak by computing in ``NCHW[x]c``:
the channels split into blocks whose inner part is contiguous, so the innermost
loop is a vector over output channels and the weights are read contiguously.
``transform_layout`` gives the padded input and the kernel that layout (the
kernel as ``OIHW[16i][16o]``); the output stays NCHW, accumulated per tile in a
local cache; ``compiler.build(prepack=["kernel"])``
converts the constant kernel once instead of on every call. The script prints
the GFLOP/s of the default schedule, the blocked one, and numpy (im2col + BLAS).
"""

import argparse
from collections.abc import Callable

import numpy as np

import compiler
from compiler import te
from compiler.runtime.profiling import time_raw
from compiler.topi.nn.conv2d import conv2d_nchw
from compiler.topi.reference import conv2d_nchw_im2col

BLOCK = 16
NCHWC = f"n, c, h, w -> n, c // {BLOCK}, h, w, c % {BLOCK}"
OIHW_IO = f"o, i, h, w -> o // {BLOCK}, i // {BLOCK}, h, w, i % {BLOCK}, o % {BLOCK}"


def conv_func(channels: int, size: int) -> compiler.ir.PrimFunc:
    data = te.placeholder((1, channels, size, size), name="data")
    kernel = te.placeholder((channels, channels, 3, 3), name="kernel")
    return te.create_prim_func([data, kernel, conv2d_nchw(data, kernel, padding=1)])


def schedule_nchwc(func: compiler.ir.PrimFunc, x_block: int) -> compiler.Schedule:
    """The padded input and the kernel blocked by 16 channels; per output row,
    ``x_block`` pixels by 16 output channels accumulate in registers (a local cache
    of the output, channels innermost) over (input channel block, ky, kx, 16 input channels)."""
    sch = compiler.Schedule(func)
    pad = sch.get_block("PadInput")
    conv = sch.get_block("conv2d_nchw")
    sch.transform_layout(pad, ("write", 0), NCHWC)
    sch.transform_layout(conv, "kernel", OIHW_IO)
    accumulator = sch.cache_write(conv, 0, "local")
    sch.transform_layout(conv, ("write", 0), "n, c, h, w -> n, h, w, c")
    n, o, y, x, rc, ry, rx = sch.get_loops(conv)
    o_outer, o_inner = sch.split(o, [None, BLOCK])
    x_outer, x_inner = sch.split(x, [None, x_block])
    rc_outer, rc_inner = sch.split(rc, [None, BLOCK])
    sch.reorder(n, o_outer, y, x_outer, rc_outer, ry, rx, rc_inner, x_inner, o_inner)
    sch.reverse_compute_at(accumulator, x_outer)
    sch.decompose_reduction(conv, rc_outer)
    sch.unroll(x_inner)
    sch.vectorize(o_inner)
    sch.parallel(o_outer)
    return sch


def gflops(channels: int, size: int, seconds: float) -> float:
    return 2 * channels * channels * 9 * size * size / seconds / 1e9


def best_seconds(call: Callable[[], object], loop_ms: float) -> float:
    """The fastest of five loops of at least ``loop_ms``."""
    return time_raw(call, (), 1, 5, loop_ms).min


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--small", action="store_true", help="32 channels, 14x14, short timing")
    options = parser.parse_args()
    channels, size, x_block = (32, 14, 7) if options.small else (64, 56, 8)
    loop_ms = 5.0 if options.small else 200.0
    rng = np.random.default_rng(0)
    data = rng.standard_normal((1, channels, size, size)).astype("float32")
    kernel = rng.standard_normal((channels, channels, 3, 3)).astype("float32")
    expected = conv2d_nchw_im2col(data, kernel, padding=1)
    out = np.empty_like(expected)
    func = conv_func(channels, size)

    default = compiler.build(func)["main"]
    default(data, kernel, out)
    np.testing.assert_allclose(out, expected, rtol=1e-3, atol=1e-3)

    sch = schedule_nchwc(func, x_block)
    blocked = compiler.build(sch.mod, prepack=["kernel"])
    pack, main_fn = blocked["main__pack_kernel"], blocked["main"]
    packed = np.empty([int(d) for d in pack.signature.params[1].shape], dtype="float32")
    pack(kernel, packed)
    out.fill(np.nan)
    main_fn(data, packed, out)
    np.testing.assert_allclose(out, expected, rtol=1e-3, atol=1e-3)
    converting = compiler.build(sch.mod)["main"]

    rows = {
        "default schedule": best_seconds(lambda: default(data, kernel, out), loop_ms),
        "NCHW[16]c, kernel converted per call": best_seconds(
            lambda: converting(data, kernel, out), loop_ms
        ),
        "NCHW[16]c, kernel prepacked": best_seconds(lambda: main_fn(data, packed, out), loop_ms),
        "numpy (im2col + BLAS)": best_seconds(
            lambda: conv2d_nchw_im2col(data, kernel, padding=1), loop_ms
        ),
    }
    print(f"conv2d NCHW 1x{channels}x{size}x{size}, {channels} 3x3 filters, pad 1")
    for name, seconds in rows.items():
        print(
            f"  {name:40s} {seconds * 1e3:8.3f} ms  {gflops(channels, size, seconds):7.1f} GFLOP/s"
        )


if __name__ == "__main__":
    main()
