"""Every registered operator at a small shape for the generated-space tests, and how
to check that a candidate's trace, replayed alone, computes what numpy does."""

from __future__ import annotations

from typing import Any

import numpy as np

import compiler
from compiler.ir.function import PrimFunc
from compiler.schedule import Schedule, Trace
from compiler.topi.reference import NUMPY_REFERENCES
from compiler.workload.spec import normalize_spec, workload_from_normalized_spec

CONV = {"batch": 1, "in_channels": 8, "height": 10, "width": 10, "out_channels": 8, "kernel": 3}
POOL = {"batch": 1, "channels": 4, "height": 10, "width": 10}
ROWS = {"shape": [16, 40]}

# Small enough to lower and build in a fraction of a second, large enough that the
# tilings and rfactor have choices.
SHAPES: dict[str, dict[str, Any]] = {
    "matmul": {"m": 32, "n": 48, "k": 64},
    "batch_matmul": {"batch": 2, "m": 16, "n": 24, "k": 32},
    "dense": {"batch": 4, "in_features": 32, "out_features": 48},
    "conv2d_nchw": {**CONV, "padding": 1},
    "conv2d_nhwc": {**CONV, "padding": 1},
    "conv2d_nchw_bias_relu": {**CONV, "padding": 1},
    "conv2d_winograd_nchw": {**{k: v for k, v in CONV.items() if k != "kernel"}, "padding": 1},
    "depthwise_conv2d_nchw": {"batch": 1, "channels": 8, "height": 10, "width": 10, "kernel": 3},
    "max_pool2d": {**POOL, "kernel": 3},
    "avg_pool2d": {**POOL, "kernel": 3},
    "global_avg_pool2d": POOL,
    "softmax": ROWS,
    "log_softmax": ROWS,
    "layer_norm": {"shape": [8, 64]},
    "transpose": {"shape": [8, 16, 12]},
    "reshape": {"shape": [8, 16, 12], "newshape": [16, -1]},
    "pad": {"shape": [12, 20], "pad_before": [1, 2], "pad_after": [3, 0]},
    "concatenate": {"shapes": [[12, 20], [4, 20]]},
    **{op: ROWS for op in ("relu", "gelu", "sigmoid", "exp", "log", "sqrt")},
    **{op: ROWS for op in ("tanh", "abs", "negative")},
    **{op: {"shape": [16, 40]} for op in ("sum", "max", "min", "mean")},
    **{
        op: {"shape_a": [8, 1, 40], "shape_b": [6, 40]}
        for op in ("add", "subtract", "multiply", "divide", "maximum", "minimum", "power")
    },
}


def workload(op: str) -> tuple[PrimFunc, dict[str, Any]]:
    """The op's PrimFunc at its SHAPES and its normalised spec."""
    spec = normalize_spec({"op": op, "args": SHAPES[op]})
    return workload_from_normalized_spec(spec), spec


def inputs(func: PrimFunc, op: str, seed: int = 7) -> list[np.ndarray]:
    """Random inputs (positive for log, sqrt, power), never zeros."""
    rng = np.random.default_rng(seed)
    positive = NUMPY_REFERENCES[op].positive
    arrays = []
    for param in func.params[:-1]:
        shape = tuple(int(d) for d in param.shape)
        values = rng.uniform(0.5, 2.0, shape) if positive else rng.standard_normal(shape)
        arrays.append(values.astype(param.dtype))
    return arrays


def expected(spec: dict[str, Any], arrays: list[np.ndarray]) -> np.ndarray:
    return NUMPY_REFERENCES[spec["op"]].compute(*arrays, **spec["args"])[0]


def run_trace(func: PrimFunc, trace: Trace | str, arrays: list[np.ndarray]) -> np.ndarray:
    """The output of ``func`` scheduled by ``trace`` alone (from its JSON), built with
    LLVM and run."""
    sch = Schedule(func)
    Trace.from_json(trace if isinstance(trace, str) else trace.to_json_string()).apply_to_schedule(
        sch
    )
    out_param = func.params[-1]
    out = np.full(tuple(int(d) for d in out_param.shape), np.nan, dtype=out_param.dtype)
    compiler.build(sch.mod["main"])(*arrays, out)
    return out
