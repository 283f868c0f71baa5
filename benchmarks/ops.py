"""Every operator of compiler.topi: numpy against the naive and the default-scheduled build.

    python benchmarks/ops.py             # ResNet-18 and BERT-base sizes, ~1-2 minutes
    python benchmarks/ops.py --quick     # small sizes, a few seconds
    python benchmarks/ops.py --json      # last line: {"rows": [{"op", "shape", ...}, ...]}
    python benchmarks/ops.py --target "llvm -num-cores=1"   # no threads: loop order only

Each row builds one operator spec twice, ``compiler.build(func,
default_schedule=False)`` (the loops exactly as ``te.create_prim_func`` wrote them)
and ``compiler.build(func)`` (the default schedule: parallel outer loops,
vectorized inner loops), checks both against numpy (or against each other where
numpy has no equivalent) and times them with the median of several runs. numpy's
convolutions are im2col followed by one matmul, the way a framework without a
convolution kernel would do it. A naive build estimated to take more than
``NAIVE_LIMIT_S`` seconds a run is not timed; its time is null.

Parallel loops wait for their slowest thread, so on a machine where other
processes hold the cores their times jump by whole scheduler slices (multiples of
~4 ms): the header prints the load average, and a run under load says so.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import compiler
from compiler.ir.function import PrimFunc
from compiler.topi.reference import NUMPY_REFERENCES
from compiler.workload.flops import flop_count
from compiler.workload.spec import workload_from_spec

NAIVE_LIMIT_S = 10.0
# A pessimistic rate for unscheduled loops, which decides whether a naive build is
# timed at all: the estimate is flops / this (or elements / this for data movement).
NAIVE_FLOOR_PER_S = 0.2e9
# How long numpy's BLAS threads are given to stop spinning before kernels are timed.
BLAS_SETTLE_S = 0.5

Arrays = list[np.ndarray]
Reference = Callable[..., np.ndarray] | None


@dataclass(frozen=True)
class Case:
    """One row: an operator spec, its size in words, and numpy's way to compute it."""

    op: str
    args: dict[str, Any]
    shape: str
    numpy: Reference


# ---- numpy references -------------------------------------------------------------------


def _shared(op: str, **args: Any) -> Reference:
    """The one numpy reference of ``op`` (``compiler.topi.reference``) with ``args``."""
    compute = NUMPY_REFERENCES[op].compute
    return lambda *inputs: compute(*inputs, **args)[0]


def _nchw(stride: int, pad: int) -> Reference:
    return _shared("conv2d_nchw", stride=stride, padding=pad, dilation=1, groups=1)


def _nhwc(pad: int) -> Reference:
    return _shared("conv2d_nhwc", stride=1, padding=pad, dilation=1, groups=1)


def _conv_bias_relu(pad: int) -> Reference:
    return _shared("conv2d_nchw_bias_relu", stride=1, padding=pad, dilation=1, groups=1)


def _depthwise(pad: int) -> Reference:
    return _shared("depthwise_conv2d_nchw", stride=1, padding=pad, dilation=1)


def _max_pool(kernel: int, stride: int, pad: int) -> Reference:
    return _shared("max_pool2d", kernel=kernel, stride=stride, padding=pad)


def _avg_pool(kernel: int, stride: int) -> Reference:
    return _shared("avg_pool2d", kernel=kernel, stride=stride, padding=0, count_include_pad=False)


_softmax = _shared("softmax", axis=-1)
_log_softmax = _shared("log_softmax", axis=-1)
_layer_norm = _shared("layer_norm", axis=-1, epsilon=1e-5)
_dense = _shared("dense", activation="none")


def _gelu() -> Reference:
    return _shared("gelu")


# ---- the rows ------------------------------------------------------------------------------


def _conv(n: int, c: int, hw: int, o: int, k: int, stride: int, pad: int) -> dict[str, Any]:
    return {
        "batch": n,
        "in_channels": c,
        "height": hw,
        "width": hw,
        "out_channels": o,
        "kernel": k,
        "stride": stride,
        "padding": pad,
    }


def _winograd(n: int, c: int, hw: int, o: int) -> dict[str, Any]:
    """A 3x3 stride-1 "same" convolution by Winograd's F(2x2, 3x3)."""
    args = _conv(n, c, hw, o, 3, 1, 1)
    del args["kernel"], args["stride"]
    return {**args, "tile_size": 2}


def _image(n: int, c: int, hw: int, **window: Any) -> dict[str, Any]:
    return {"batch": n, "channels": c, "height": hw, "width": hw, **window}


@dataclass(frozen=True)
class Sizes:
    image: int  # side of ResNet-18's first-stage feature maps
    channels: int  # channels of that stage
    wide: int  # channels of the last stage
    last_image: int  # side of the last stage's feature maps
    classes: int  # outputs of the classifier
    tokens: int  # BERT sequence length
    hidden: int
    ffn: int  # the feed-forward layer's inner width
    heads: int
    head_dim: int


FULL = Sizes(56, 64, 512, 7, 1000, 128, 768, 3072, 12, 64)
QUICK = Sizes(14, 8, 16, 5, 100, 16, 48, 96, 2, 8)


def cases(z: Sizes) -> list[Case]:
    """One row per operator (a few for the ones that dominate real networks)."""
    img, ch, wide, last = z.image, z.channels, z.wide, z.last_image
    tokens, hidden, ffn, heads = z.tokens, z.hidden, z.ffn, z.heads
    ffn_shape, row_shape = [tokens, ffn], [tokens, hidden]
    ffn_text, row_text = f"{tokens}x{ffn}", f"{tokens}x{hidden}"
    binary = {"shape_a": row_shape, "shape_b": [hidden]}
    attention = [heads, tokens, tokens]
    attention_text = f"{heads}x{tokens}x{tokens}"
    stage = f"1x{ch}x{img}x{img}"
    rows = [
        Case("conv2d_nchw", _conv(1, ch, img, ch, 3, 1, 1), f"{stage}, {ch} 3x3", _nchw(1, 1)),
        Case(
            "conv2d_nchw",
            _conv(1, wide, last, wide, 3, 1, 1),
            f"1x{wide}x{last}x{last}, {wide} 3x3",
            _nchw(1, 1),
        ),
        Case(
            "conv2d_winograd_nchw",
            _winograd(1, wide, last, wide),
            f"1x{wide}x{last}x{last}, {wide} 3x3 F(2x2)",
            _nchw(1, 1),
        ),
        Case(
            "conv2d_nchw",
            _conv(1, ch, img, 2 * ch, 3, 2, 1),
            f"{stage}, {2 * ch} 3x3 s2",
            _nchw(2, 1),
        ),
        Case(
            "conv2d_nhwc", _conv(1, ch, img, ch, 3, 1, 1), f"1x{img}x{img}x{ch}, {ch} 3x3", _nhwc(1)
        ),
        Case(
            "conv2d_nchw_bias_relu",
            _conv(1, ch, img, ch, 3, 1, 1),
            f"{stage}, {ch} 3x3",
            _conv_bias_relu(1),
        ),
        Case(
            "depthwise_conv2d_nchw",
            _image(1, ch, img, kernel=3, padding=1),
            f"{stage} 3x3",
            _depthwise(1),
        ),
        Case(
            "max_pool2d",
            _image(1, ch, 2 * img, kernel=3, stride=2, padding=1),
            f"1x{ch}x{2 * img}x{2 * img} 3x3 s2",
            _max_pool(3, 2, 1),
        ),
        Case(
            "avg_pool2d", _image(1, ch, img, kernel=2, stride=2), f"{stage} 2x2 s2", _avg_pool(2, 2)
        ),
        Case(
            "global_avg_pool2d",
            _image(1, wide, last),
            f"1x{wide}x{last}x{last}",
            lambda x: x.mean(axis=(2, 3)),
        ),
        Case("dense", _dense_args(1, wide, z.classes), f"1x{wide}x{z.classes}", _dense),
        Case("dense", _dense_args(tokens, hidden, hidden), f"{tokens}x{hidden}x{hidden}", _dense),
        Case("dense", _dense_args(tokens, hidden, ffn), f"{tokens}x{hidden}x{ffn}", _dense),
        Case(
            "matmul",
            {"m": tokens, "n": hidden, "k": hidden},
            f"{tokens}x{hidden}x{hidden}",
            np.matmul,
        ),
        Case(
            "batch_matmul",
            {"batch": heads, "m": tokens, "n": z.head_dim, "k": tokens},
            f"{heads}x{tokens}x{z.head_dim}x{tokens}",
            np.matmul,
        ),
        Case("softmax", {"shape": attention}, attention_text, _softmax),
        Case("log_softmax", {"shape": attention}, attention_text, _log_softmax),
        Case("layer_norm", {"shape": row_shape}, row_text, _layer_norm),
        Case("gelu", {"shape": ffn_shape}, ffn_text, _gelu()),
        Case("relu", {"shape": ffn_shape}, ffn_text, lambda x: np.maximum(x, 0)),
        Case("sigmoid", {"shape": ffn_shape}, ffn_text, lambda x: 1 / (1 + np.exp(-x))),
        *(Case(op, {"shape": ffn_shape}, ffn_text, getattr(np, op)) for op in _SAME_NAME_UNARY),
        *(
            Case(op, binary, f"{row_text} and {hidden}", getattr(np, op))
            for op in _SAME_NAME_BINARY
        ),
        *(
            Case(op, {"shape": row_shape, "axis": -1}, f"{row_text} axis -1", _reduce(op, -1))
            for op in ("sum", "mean", "max")
        ),
        Case("min", {"shape": row_shape, "axis": 0}, f"{row_text} axis 0", _reduce("min", 0)),
        Case(
            "transpose",
            {"shape": [tokens, heads, z.head_dim], "axes": [1, 0, 2]},
            f"{tokens}x{heads}x{z.head_dim} (1, 0, 2)",
            lambda x: np.ascontiguousarray(x.transpose(1, 0, 2)),
        ),
        Case(
            "reshape",
            {"shape": row_shape, "newshape": [tokens, heads, -1]},
            f"{row_text} -> {tokens}x{heads}x{hidden // heads}",
            lambda x: x.reshape(tokens, heads, -1).copy(),
        ),
        Case(
            "pad",
            {"shape": [1, ch, img, img], "pad_before": [0, 0, 1, 1], "pad_after": [0, 0, 1, 1]},
            f"{stage} by 1",
            lambda x: np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))),
        ),
        Case(
            "concatenate",
            {"shapes": [[1, ch, img, img]] * 2, "axis": 1},
            f"2 x {stage} axis 1",
            lambda a, b: np.concatenate([a, b], axis=1),
        ),
    ]
    return rows


_SAME_NAME_UNARY = ("tanh", "exp", "log", "sqrt", "abs", "negative")
_SAME_NAME_BINARY = ("add", "subtract", "multiply", "divide", "maximum", "minimum", "power")


def _reduce(op: str, axis: int) -> Callable[[np.ndarray], np.ndarray]:
    return lambda x: getattr(x, op)(axis=axis)


def _dense_args(batch: int, in_features: int, out_features: int) -> dict[str, Any]:
    return {"batch": batch, "in_features": in_features, "out_features": out_features}


# ---- measuring -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    op: str
    shape: str
    numpy_s: float | None
    naive_s: float | None
    default_s: float
    naive_skipped: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "shape": self.shape,
            "numpy_s": self.numpy_s,
            "naive_s": self.naive_s,
            "default_s": self.default_s,
        }


@dataclass(frozen=True)
class Timing:
    repeat: int
    min_repeat_ms: float


@dataclass(frozen=True)
class Prepared:
    """A case with its workload, random inputs and numpy's answer and time."""

    case: Case
    func: PrimFunc
    arrays: Arrays
    expected: np.ndarray | None
    numpy_s: float | None


def prepare(case: Case, timing: Timing) -> Prepared:
    func = workload_from_spec({"op": case.op, "args": case.args})
    rng = np.random.default_rng(0)
    # positive and away from zero, so log, sqrt, divide and power stay finite
    arrays = [rng.uniform(0.5, 2.0, _shape(p)).astype(p.dtype) for p in func.params[:-1]]
    if case.numpy is None:
        return Prepared(case, func, arrays, None, None)
    expected = np.asarray(case.numpy(*arrays))
    return Prepared(case, func, arrays, expected, _time_numpy(case.numpy, arrays, timing))


def measure(prepared: Prepared, timing: Timing, target: str) -> Row:
    """Build, check and time one case both ways."""
    case, func, arrays = prepared.case, prepared.func, prepared.arrays
    output = func.params[-1]
    scheduled = compiler.build(func, target=target)
    result = _run(scheduled, arrays, _shape(output), output.dtype)
    if prepared.expected is not None:
        _check(case, "default schedule", result, prepared.expected)
    default_s = _time_build(scheduled, arrays, result, timing)

    estimate = _naive_estimate_s(func)
    if estimate > NAIVE_LIMIT_S:
        skipped = f"estimated {estimate:.0f} s a run, over {NAIVE_LIMIT_S:.0f} s"
        return Row(case.op, case.shape, prepared.numpy_s, None, default_s, skipped)
    naive = compiler.build(func, target=target, default_schedule=False)
    naive_result = _run(naive, arrays, _shape(output), output.dtype)
    want = prepared.expected if prepared.expected is not None else result
    _check(case, "naive build", naive_result, want)
    naive_s = _time_build(naive, arrays, naive_result, timing)
    return Row(case.op, case.shape, prepared.numpy_s, naive_s, default_s)


def _shape(buffer: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in buffer.shape)


def _run(lib: Any, arrays: Arrays, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    out = np.full(shape, np.nan, dtype=dtype)
    lib(*arrays, out)
    return out


def _check(case: Case, what: str, got: np.ndarray, want: np.ndarray) -> None:
    """A wrong fast kernel is worse than a slow one: stop the benchmark on one."""
    try:
        np.testing.assert_allclose(got, np.asarray(want).reshape(got.shape), rtol=1e-3, atol=1e-3)
    except AssertionError as err:
        raise SystemExit(
            f"{case.op} {case.shape}: the {what} computes a wrong result\n{err}"
        ) from None


def _time_build(lib: Any, arrays: Arrays, out: np.ndarray, timing: Timing) -> float:
    evaluate = lib.time_evaluator(
        "main", number=1, repeat=timing.repeat, min_repeat_ms=timing.min_repeat_ms
    )
    return float(evaluate(*arrays, out).median)


def _time_numpy(reference: Callable[..., np.ndarray], arrays: Arrays, timing: Timing) -> float:
    reference(*arrays)
    runs = []
    number = 1
    for _ in range(timing.repeat):
        while True:
            start = time.perf_counter()
            for _ in range(number):
                reference(*arrays)
            elapsed = time.perf_counter() - start
            if elapsed * 1e3 >= timing.min_repeat_ms:
                break
            number *= 2
        runs.append(elapsed / number)
    return statistics.median(runs)


def _naive_estimate_s(func: PrimFunc) -> float:
    """A pessimistic guess at one naive run: the work over a slow scalar rate."""
    elements = sum(math.prod(_shape(p)) for p in func.params)
    return max(flop_count(func), elements) / NAIVE_FLOOR_PER_S


# ---- reporting ---------------------------------------------------------------------------


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3f}"


def _ratio(numerator: float | None, denominator: float) -> str:
    return "-" if numerator is None else f"{numerator / denominator:.2f}"


HEADER = (
    f"{'op':<22} {'shape':<30} {'numpy ms':>10} {'naive ms':>10} {'default ms':>10} "
    f"{'naive/def':>9} {'numpy/def':>9}"
)


def format_row(row: Row) -> str:
    line = (
        f"{row.op:<22} {row.shape:<30} {_ms(row.numpy_s):>10} {_ms(row.naive_s):>10} "
        f"{_ms(row.default_s):>10} {_ratio(row.naive_s, row.default_s):>9} "
        f"{_ratio(row.numpy_s, row.default_s):>9}"
    )
    if row.naive_skipped:
        line += f"  (naive not timed: {row.naive_skipped})"
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small shapes, a few seconds")
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    parser.add_argument("--op", action="append", help="only these ops (repeatable)")
    parser.add_argument(
        "--target", default="llvm", help='e.g. "llvm -num-cores=1" to leave threads out'
    )
    args = parser.parse_args()
    sizes, timing = (QUICK, Timing(3, 2.0)) if args.quick else (FULL, Timing(5, 40.0))
    selected = [c for c in cases(sizes) if not args.op or c.op in args.op]

    # numpy first, all of it: BLAS threads spin for a while after each call, and on
    # a small machine they would take the cores from the parallel loops timed next.
    prepared = [prepare(case, timing) for case in selected]
    time.sleep(BLAS_SETTLE_S)
    load = os.getloadavg()[0]
    print(f"{os.cpu_count()} cores, load average {load:.2f} before timing", end="")
    print(" (other processes compete for the cores: parallel timings suffer)" if load > 0.5 else "")
    print("naive/def: the default schedule's speed-up over the naive build;")
    print("numpy/def: above 1 when the default schedule beats numpy")
    print(HEADER)
    rows = []
    for item in prepared:
        row = measure(item, timing, args.target)
        rows.append(row)
        print(format_row(row), flush=True)
    if args.json:
        print(json.dumps({"rows": [row.as_json() for row in rows]}))


if __name__ == "__main__":
    main()
