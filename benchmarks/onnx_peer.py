"""onnxruntime as a peer: the same operator as a one-node ONNX model (dense with ReLU:
two nodes), run the way a user would run it (all cores, default graph optimizations).

onnxruntime is optional (the ``bench`` extra: ``pip install -e '.[bench]'``);
``session_for`` returns None where it is not installed or has no such operator, and
the benchmarks leave the column out.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class OnnxPeer:
    """``run`` is what is timed: the session on inputs laid out as the ONNX operator
    wants them (converted once, before timing: NHWC data and HWIO weights become NCHW
    and OIHW); ``in_workload_layout`` turns its output back, to compare with ours."""

    run: Callable[[], np.ndarray]
    in_workload_layout: Callable[[np.ndarray], np.ndarray]


def onnxruntime_version() -> str | None:
    try:
        import onnxruntime
    except ImportError:
        return None
    return str(onnxruntime.__version__)


def session_for(
    spec: Mapping[str, Any],
    inputs: list[np.ndarray],
    output_ndim: int,
    constants: Sequence[int] = (),
) -> OnnxPeer | None:
    """``spec`` on ``inputs`` (giving an output of ``output_ndim`` dimensions) as a
    small ONNX model run by onnxruntime, or None where onnxruntime is missing or the
    operator has no ONNX form here. The inputs at the positions ``constants`` (a
    model's weights) are the model's initializers, which onnxruntime may prepack."""
    try:
        import onnx
        import onnxruntime
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        return None
    form = _form(spec, helper)
    if form is None:
        return None
    arrays = [np.ascontiguousarray(a) for a in form.inputs(inputs)]
    names = [f"x{k}" for k in range(len(arrays))]
    fed = [k for k in range(len(arrays)) if k not in constants]
    graph = helper.make_graph(
        form.nodes(names, "y"),
        "peer",
        [
            helper.make_tensor_value_info(names[k], TensorProto.FLOAT, list(arrays[k].shape))
            for k in fed
        ],
        [
            helper.make_tensor_value_info(
                "y", TensorProto.FLOAT, [f"y{k}" for k in range(output_ndim)]
            )
        ],
        [numpy_helper.from_array(arrays[k], names[k]) for k in constants],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = os.cpu_count() or 1
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    feeds = {names[k]: arrays[k] for k in fed}
    return OnnxPeer(lambda: session.run(None, feeds)[0], form.output)


Nodes = Callable[[list[str], str], list[Any]]


@dataclass(frozen=True)
class _Form:
    """An operator in ONNX: its nodes (input names, output name), how our inputs become
    its inputs, and how its output becomes ours."""

    nodes: Nodes
    inputs: Callable[[list[np.ndarray]], list[np.ndarray]] = list
    output: Callable[[np.ndarray], np.ndarray] = np.asarray


def _form(spec: Mapping[str, Any], helper: Any) -> _Form | None:
    op, args = spec["op"], spec.get("args", {})
    if op == "matmul" and not args.get("transpose_a") and not args.get("transpose_b"):
        return _Form(lambda i, o: [helper.make_node("MatMul", i, [o])])
    if op == "dense":
        return _dense(args, helper)
    if op in ("conv2d_nchw", "conv2d_nhwc") and args.get("groups", 1) == 1:
        return _conv(op, args, helper)
    if op == "softmax":
        axis = int(args.get("axis", -1))
        return _Form(lambda i, o: [helper.make_node("Softmax", i, [o], axis=axis)])
    if op == "layer_norm" and isinstance(args.get("axis", -1), int):
        axis, epsilon = int(args.get("axis", -1)), float(args.get("epsilon", 1e-5))
        return _Form(
            lambda i, o: [
                helper.make_node("LayerNormalization", i, [o], axis=axis, epsilon=epsilon)
            ]
        )
    return None


def _dense(args: Mapping[str, Any], helper: Any) -> _Form | None:
    activation = args.get("activation", "none")
    if activation not in ("none", "relu"):
        return None

    def nodes(inputs: list[str], out: str) -> list[Any]:
        if activation == "none":
            return [helper.make_node("Gemm", inputs, [out], transB=1)]
        return [
            helper.make_node("Gemm", inputs, ["gemm"], transB=1),
            helper.make_node("Relu", ["gemm"], [out]),
        ]

    return _Form(nodes)


def _conv(op: str, args: Mapping[str, Any], helper: Any) -> _Form:
    pads = _pads(args.get("padding", 0))
    strides, dilations = _pair(args.get("stride", 1)), _pair(args.get("dilation", 1))
    nodes: Nodes = lambda i, o: [  # noqa: E731
        helper.make_node("Conv", i, [o], pads=pads, strides=strides, dilations=dilations)
    ]
    if op == "conv2d_nchw":
        return _Form(nodes)
    return _Form(
        nodes,
        inputs=lambda xs: [xs[0].transpose(0, 3, 1, 2), xs[1].transpose(3, 2, 0, 1)],
        output=lambda y: y.transpose(0, 2, 3, 1),
    )


def _pair(value: Any) -> list[int]:
    return [int(value)] * 2 if isinstance(value, int) else [int(v) for v in value]


def _pads(value: Any) -> list[int]:
    """Our padding (one, [height, width] or [top, left, bottom, right]) as ONNX's
    [top, left, bottom, right]."""
    if isinstance(value, int):
        return [value] * 4
    if len(value) == 2:
        return [int(value[0]), int(value[1])] * 2
    return [int(v) for v in value]
