"""Arguments of every registered operator, small and odd-sized so that each one also
compiles and runs fast: the examples the workload, flop and schedule tests walk."""

from __future__ import annotations

from typing import Any

SMALL_CONV = {
    "batch": 1,
    "in_channels": 8,
    "height": 9,
    "width": 7,
    "out_channels": 6,
    "kernel": 3,
    "padding": 1,
}

# Arguments of every registered op: small, odd sizes, so each also compiles and runs fast.
EXAMPLES: dict[str, dict[str, Any]] = {
    "matmul": {"m": 5, "n": 7, "k": 3},
    "batch_matmul": {"batch": 2, "m": 5, "n": 7, "k": 3},
    "dense": {"batch": 3, "in_features": 5, "out_features": 7},
    "conv2d_nchw": {**SMALL_CONV, "stride": 2},
    "conv2d_nhwc": {**SMALL_CONV, "groups": 2, "dilation": [1, 2]},
    "conv2d_nchw_bias_relu": {**SMALL_CONV, "kernel": [3, 1], "padding": [1, 0, 2, 0]},
    "conv2d_winograd_nchw": {
        "batch": 1,
        "in_channels": 8,
        "height": 9,
        "width": 7,
        "out_channels": 6,
        "padding": 1,
    },
    "depthwise_conv2d_nchw": {"batch": 1, "channels": 8, "height": 9, "width": 9, "kernel": 3},
    "max_pool2d": {"batch": 1, "channels": 3, "height": 9, "width": 9, "kernel": 3},
    "avg_pool2d": {"batch": 1, "channels": 3, "height": 9, "width": 9, "kernel": 3},
    "global_avg_pool2d": {"batch": 1, "channels": 3, "height": 9, "width": 9},
    "softmax": {"shape": [3, 5]},
    "log_softmax": {"shape": [3, 5]},
    "layer_norm": {"shape": [3, 5, 7]},
    "transpose": {"shape": [3, 5, 7]},
    "reshape": {"shape": [3, 5, 7], "newshape": [5, -1]},
    "pad": {"shape": [3, 5], "pad_before": [1, 0], "pad_after": [0, 2]},
    "concatenate": {"shapes": [[3, 5], [2, 5]]},
    **{op: {"shape": [3, 5]} for op in ("relu", "gelu", "sigmoid", "exp", "log", "sqrt")},
    **{op: {"shape": [3, 5]} for op in ("tanh", "abs", "negative")},
    **{op: {"shape": [3, 5]} for op in ("sum", "max", "min", "mean")},
    **{
        op: {"shape_a": [3, 1, 5], "shape_b": [4, 1]}
        for op in ("add", "subtract", "multiply", "divide", "maximum", "minimum", "power")
    },
}
