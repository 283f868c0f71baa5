"""onnxruntime as a peer: the same operator as a one-node ONNX model, run the way a user
would run it (all cores, default graph optimizations).

onnxruntime is optional (the ``bench`` extra: ``pip install -e '.[bench]'``);
``session_for`` returns None where it is not installed or has no such operator, and
the benchmarks leave the column out.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

OnnxCall = Callable[[], np.ndarray]


def onnxruntime_version() -> str | None:
    try:
        import onnxruntime
    except ImportError:
        return None
    return str(onnxruntime.__version__)


def session_for(
    spec: Mapping[str, Any], inputs: list[np.ndarray], output_shape: tuple[int, ...]
) -> OnnxCall | None:
    """A call that runs ``spec`` on ``inputs`` (giving ``output_shape``) with
    onnxruntime, or None where onnxruntime is missing or the operator has no one-node
    ONNX form here."""
    try:
        import onnx
        import onnxruntime
        from onnx import TensorProto, helper
    except ImportError:
        return None
    node = _node(spec, helper)
    if node is None:
        return None
    names = [f"x{k}" for k in range(len(inputs))]
    graph = helper.make_graph(
        [node(names, "y")],
        "peer",
        [
            helper.make_tensor_value_info(n, TensorProto.FLOAT, list(a.shape))
            for n, a in zip(names, inputs, strict=True)
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(output_shape))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = os.cpu_count() or 1
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    feeds = dict(zip(names, inputs, strict=True))
    return lambda: session.run(None, feeds)[0]


def _node(spec: Mapping[str, Any], helper: Any) -> Callable[[list[str], str], Any] | None:
    op, args = spec["op"], spec.get("args", {})
    if op == "matmul":
        return lambda inputs, out: helper.make_node("MatMul", inputs, [out])
    if op == "conv2d_nchw":
        pad = int(args.get("padding", 0))
        stride = int(args.get("stride", 1))
        dilation = int(args.get("dilation", 1))
        return lambda inputs, out: helper.make_node(
            "Conv",
            inputs,
            [out],
            pads=[pad] * 4,
            strides=[stride] * 2,
            dilations=[dilation] * 2,
        )
    return None
