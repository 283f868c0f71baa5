"""Small ONNX models built with ``onnx.helper``, for the importer and the executor.

Each builder takes a ``numpy.random.Generator`` for its float32 weights and returns a
model that ``onnx.checker`` accepts (but the malformed ones, which exist to be
refused). Weights are scaled by 1/sqrt(fan-in), so activations stay near 1 and a
comparison at a relative tolerance means the same at every layer.
``OP_MODELS`` holds one model per group of supported operators; ``MODELS`` holds
those and the larger ones, for tests that walk them all.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, external_data_helper, helper, numpy_helper

Shape = Sequence[int | str]
Builder = Callable[[np.random.Generator], onnx.ModelProto]

# Old enough for the onnxruntime of the test extra, new enough for every opset used.
_IR_VERSION = 9


def make_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Mapping[str, Shape],
    outputs: Sequence[str],
    initializers: Mapping[str, np.ndarray] | None = None,
    opset: int = 17,
    *,
    check: bool = True,
    initializers_as_inputs: bool = False,
) -> onnx.ModelProto:
    """A one-graph model of float32 ``inputs`` whose outputs ONNX shape inference types
    (the importer never reads them). Older exporters list the initializers among the
    graph inputs too (``initializers_as_inputs``)."""
    weights = dict(initializers or {})
    declared = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()]
    if initializers_as_inputs:
        declared += [
            helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape) for n, a in weights.items()
        ]
    graph = helper.make_graph(
        list(nodes),
        "model",
        declared,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        [numpy_helper.from_array(a, n) for n, a in weights.items()],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=_IR_VERSION
    )
    if not check:
        return model
    # The checker wants every output typed; shape inference types them.
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    onnx.checker.check_model(model)
    return model


def external_data(tensor: onnx.TensorProto, location: str) -> bytes:
    """Turn ``tensor`` into one whose data lies in the file ``location`` names, as ONNX
    saves a large model; returns the bytes that file would hold (nothing is written)."""
    content = numpy_helper.to_array(tensor).tobytes()
    external_data_helper.set_external_data(tensor, location, offset=0, length=len(content))
    tensor.ClearField("raw_data")
    tensor.data_location = onnx.TensorProto.EXTERNAL
    return content


def weight(rng: np.random.Generator, *shape: int, fan_in: int | None = None) -> np.ndarray:
    """Normal weights scaled by 1/sqrt(fan_in) (the last dimension when not given)."""
    scale = 1.0 / math.sqrt(fan_in if fan_in is not None else shape[-1])
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def ints(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def scalar(value: float) -> np.ndarray:
    return np.array(value, dtype=np.float32)


def node(
    op_type: str, inputs: Sequence[str], outputs: Sequence[str], **attrs: Any
) -> onnx.NodeProto:
    """A node named after its first output, so messages name something readable."""
    return helper.make_node(
        op_type, list(inputs), list(outputs), name=f"{outputs[0]}_node", **attrs
    )


def _batch_norm(rng: np.random.Generator, prefix: str, channels: int) -> dict[str, np.ndarray]:
    return {
        f"{prefix}_scale": rng.uniform(0.5, 1.5, channels).astype(np.float32),
        f"{prefix}_bias": (rng.standard_normal(channels) * 0.1).astype(np.float32),
        f"{prefix}_mean": (rng.standard_normal(channels) * 0.1).astype(np.float32),
        f"{prefix}_var": rng.uniform(0.5, 1.5, channels).astype(np.float32),
    }


def _bn_node(x: str, prefix: str, out: str) -> onnx.NodeProto:
    suffixes = ("scale", "bias", "mean", "var")
    return node("BatchNormalization", [x, *(f"{prefix}_{s}" for s in suffixes)], [out])


# ---- whole models ---------------------------------------------------------------------------


def mlp(rng: np.random.Generator) -> onnx.ModelProto:
    """Gemm (B as (N, K), transB) + Relu + Gemm (B as (K, N)) + Softmax, batch 4."""
    nodes = [
        node("Gemm", ["x", "w1", "b1"], ["h"], transB=1),
        node("Relu", ["h"], ["a"]),
        node("Gemm", ["a", "w2", "b2"], ["logits"]),
        node("Softmax", ["logits"], ["probs"], axis=1),
    ]
    weights = {
        "w1": weight(rng, 32, 16),
        "b1": weight(rng, 32, fan_in=16),
        "w2": weight(rng, 32, 10, fan_in=32),
        "b2": weight(rng, 10, fan_in=32),
    }
    return make_model(nodes, {"x": [4, 16]}, ["probs"], weights, opset=13)


def resnet_block(rng: np.random.Generator) -> onnx.ModelProto:
    """A basic residual block, then MaxPool, GlobalAveragePool, Flatten and a Gemm head;
    input 1x8x16x16."""
    nodes = [
        node("Conv", ["x", "conv1_w", "conv1_b"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        _bn_node("c1", "bn1", "n1"),
        node("Relu", ["n1"], ["r1"]),
        node("Conv", ["r1", "conv2_w"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        _bn_node("c2", "bn2", "n2"),
        node("Add", ["n2", "x"], ["sum"]),
        node("Relu", ["sum"], ["r2"]),
        node("MaxPool", ["r2"], ["pool"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        node("GlobalAveragePool", ["pool"], ["gap"]),
        node("Flatten", ["gap"], ["flat"], axis=1),
        node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1),
    ]
    weights = {
        "conv1_w": weight(rng, 8, 8, 3, 3, fan_in=72),
        "conv1_b": weight(rng, 8, fan_in=72),
        **_batch_norm(rng, "bn1", 8),
        "conv2_w": weight(rng, 8, 8, 3, 3, fan_in=72),
        **_batch_norm(rng, "bn2", 8),
        "fc_w": weight(rng, 10, 8),
        "fc_b": weight(rng, 10, fan_in=8),
    }
    return make_model(nodes, {"x": [1, 8, 16, 16]}, ["logits"], weights)


def transformer_layer(
    rng: np.random.Generator, seq: int = 16, hidden: int = 32, heads: int = 2
) -> onnx.ModelProto:
    """A BERT encoder layer as exporters write it (opset 17): attention with the heads
    split by Reshape/Transpose, residual + LayerNormalization, and a feed-forward
    block whose GELU is written with Erf."""
    d = hidden // heads
    weights: dict[str, np.ndarray] = {
        "heads_shape": ints(1, seq, heads, d),
        "merged_shape": ints(1, seq, hidden),
        "sqrt_d": scalar(math.sqrt(d)),
        "sqrt_2": scalar(math.sqrt(2.0)),
        "one": scalar(1.0),
        "half": scalar(0.5),
        "ln1_g": rng.uniform(0.5, 1.5, hidden).astype(np.float32),
        "ln1_b": weight(rng, hidden),
        "ln2_g": rng.uniform(0.5, 1.5, hidden).astype(np.float32),
        "ln2_b": weight(rng, hidden),
    }
    nodes = []

    def dense(x: str, name: str, k: int, n: int) -> str:
        weights[f"{name}_w"] = weight(rng, k, n, fan_in=k)
        weights[f"{name}_b"] = weight(rng, n, fan_in=k)
        nodes.append(node("MatMul", [x, f"{name}_w"], [f"{name}_mm"]))
        nodes.append(node("Add", [f"{name}_mm", f"{name}_b"], [name]))
        return name

    for name, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
        dense("x", name, hidden, hidden)
        nodes.append(node("Reshape", [name, "heads_shape"], [f"{name}_split"]))
        nodes.append(node("Transpose", [f"{name}_split"], [f"{name}_heads"], perm=perm))
    nodes += [
        node("MatMul", ["q_heads", "k_heads"], ["scores"]),
        node("Div", ["scores", "sqrt_d"], ["scaled"]),
        node("Softmax", ["scaled"], ["probs"], axis=-1),
        node("MatMul", ["probs", "v_heads"], ["context"]),
        node("Transpose", ["context"], ["context_t"], perm=[0, 2, 1, 3]),
        node("Reshape", ["context_t", "merged_shape"], ["merged"]),
    ]
    dense("merged", "attn", hidden, hidden)
    nodes += [
        node("Add", ["attn", "x"], ["res1"]),
        node("LayerNormalization", ["res1", "ln1_g", "ln1_b"], ["ln1"], axis=-1, epsilon=1e-5),
    ]
    dense("ln1", "ff1", hidden, 4 * hidden)
    nodes += [
        node("Div", ["ff1", "sqrt_2"], ["gelu_div"]),
        node("Erf", ["gelu_div"], ["gelu_erf"]),
        node("Add", ["gelu_erf", "one"], ["gelu_add"]),
        node("Mul", ["ff1", "gelu_add"], ["gelu_mul"]),
        node("Mul", ["gelu_mul", "half"], ["gelu"]),
    ]
    dense("gelu", "ff2", 4 * hidden, hidden)
    nodes += [
        node("Add", ["ff2", "ln1"], ["res2"]),
        node("LayerNormalization", ["res2", "ln2_g", "ln2_b"], ["out"], axis=-1, epsilon=1e-5),
    ]
    return make_model(nodes, {"x": [1, seq, hidden]}, ["out"], weights)


def repeated_blocks(rng: np.random.Generator, copies: int = 3) -> onnx.ModelProto:
    """The same Conv+Relu block ``copies`` times with different weights: one fused
    workload that appears ``copies`` times."""
    nodes, weights, x = [], {}, "x"
    for k in range(copies):
        weights[f"w{k}"] = weight(rng, 8, 8, 3, 3, fan_in=72)
        weights[f"b{k}"] = weight(rng, 8, fan_in=72)
        nodes.append(node("Conv", [x, f"w{k}", f"b{k}"], [f"conv{k}"], pads=[1, 1, 1, 1]))
        nodes.append(node("Relu", [f"conv{k}"], [f"relu{k}"]))
        x = f"relu{k}"
    return make_model(nodes, {"x": [1, 8, 12, 12]}, [x], weights)


# ---- one model per group of operators -------------------------------------------------------


def conv_variants(rng: np.random.Generator) -> onnx.ModelProto:
    """Groups, depthwise, strides, dilations and every auto_pad, on a 1x4x9x9 input."""
    cases: dict[str, tuple[tuple[int, ...], dict[str, Any]]] = {
        "grouped": ((6, 2, 3, 3), {"group": 2, "pads": [1, 0, 2, 1]}),
        "depthwise": ((4, 1, 3, 3), {"group": 4, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
        "dilated": ((5, 4, 3, 3), {"dilations": [2, 2], "strides": [1, 2]}),
        "same_upper": ((3, 4, 4, 4), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
        "same_lower": ((3, 4, 4, 3), {"auto_pad": "SAME_LOWER"}),
        "valid": ((3, 4, 2, 2), {"auto_pad": "VALID", "strides": [2, 1]}),
    }
    nodes, weights = [], {}
    for name, (shape, attrs) in cases.items():
        weights[f"{name}_w"] = weight(rng, *shape, fan_in=math.prod(shape[1:]))
        nodes.append(node("Conv", ["x", f"{name}_w"], [name], **attrs))
    return make_model(nodes, {"x": [1, 4, 9, 9]}, list(cases), weights)


def pooling(rng: np.random.Generator) -> onnx.ModelProto:
    """AveragePool with and without the padding counted, MaxPool with SAME_LOWER and a
    ceil_mode that changes nothing, GlobalMaxPool."""
    nodes = [
        node("AveragePool", ["x"], ["avg"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        node(
            "AveragePool",
            ["x"],
            ["avg_counted"],
            kernel_shape=[2, 3],
            pads=[0, 1, 1, 1],
            count_include_pad=1,
        ),
        node("MaxPool", ["x"], ["max_same"], kernel_shape=[2, 2], auto_pad="SAME_LOWER"),
        node("MaxPool", ["x"], ["max_ceil"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
        node("GlobalMaxPool", ["x"], ["global_max"]),
    ]
    outputs = ["avg", "avg_counted", "max_same", "max_ceil", "global_max"]
    return make_model(nodes, {"x": [1, 3, 9, 9]}, outputs)


def activations(rng: np.random.Generator) -> onnx.ModelProto:
    """Each unary operator on the same input (Log and Sqrt of |x| + 1)."""
    nodes = [
        node("Clip", ["x", "low", "high"], ["clip"]),
        node("Clip", ["x", "", "high"], ["clip_high"]),
        node("Sigmoid", ["x"], ["sigmoid"]),
        node("Tanh", ["x"], ["tanh"]),
        node("Exp", ["x"], ["exp"]),
        node("Abs", ["x"], ["abs"]),
        node("Neg", ["x"], ["neg"]),
        node("Add", ["abs", "one"], ["positive"]),
        node("Log", ["positive"], ["log"]),
        node("Sqrt", ["positive"], ["sqrt"]),
        node("Erf", ["x"], ["erf"]),
        node("LeakyRelu", ["x"], ["leaky"], alpha=0.1),
        node("HardSigmoid", ["x"], ["hard_sigmoid"], alpha=0.3, beta=0.4),
        node("HardSwish", ["x"], ["hard_swish"]),
    ]
    outputs = [n.output[0] for n in nodes if n.output[0] not in ("abs", "positive")]
    weights = {"low": scalar(-0.5), "high": scalar(0.7), "one": scalar(1.0)}
    return make_model(nodes, {"x": [2, 3, 5]}, outputs, weights)


def gelu(rng: np.random.Generator) -> onnx.ModelProto:
    """Gelu of opset 20, exact and tanh-approximated."""
    nodes = [
        node("Gelu", ["x"], ["exact"]),
        node("Gelu", ["x"], ["tanh"], approximate="tanh"),
    ]
    return make_model(nodes, {"x": [3, 7]}, ["exact", "tanh"], opset=20)


def arithmetic(rng: np.random.Generator) -> onnx.ModelProto:
    """The binary operators with broadcasting: scalars of shape () and (1,), a row
    vector, a second input; Sum and Mean of three."""
    nodes = [
        node("Sub", ["x", "y"], ["sub"]),
        node("Mul", ["x", "row"], ["mul"]),
        node("Div", ["x", "two"], ["div"]),
        node("Abs", ["x"], ["abs"]),
        node("Add", ["abs", "one"], ["positive"]),
        node("Pow", ["positive", "exponent"], ["pow"]),
        node("Max", ["x", "y", "row"], ["max"]),
        node("Min", ["x", "zero"], ["min"]),
        node("Sum", ["x", "y", "row"], ["sum"]),
        node("Mean", ["x", "y", "row"], ["mean"]),
    ]
    weights = {
        "row": weight(rng, 5, fan_in=1),
        "two": scalar(2.0),
        "one": np.ones(1, np.float32),
        "exponent": np.array([1.5], np.float32),
        "zero": scalar(0.0),
    }
    outputs = ["sub", "mul", "div", "pow", "max", "min", "sum", "mean"]
    return make_model(nodes, {"x": [3, 5], "y": [1, 5]}, outputs, weights)


def products(rng: np.random.Generator) -> onnx.ModelProto:
    """Gemm with transA, alpha, beta and a run-time B; MatMul of a vector, of a batch
    by a matrix, and of batches, one of which broadcasts."""
    nodes = [
        node("Gemm", ["a", "gemm_b", "gemm_c"], ["gemm"], transA=1, alpha=0.5, beta=2.0),
        node("Gemm", ["m", "n", "row_c"], ["gemm_runtime"], transB=1, alpha=1.5),
        node("MatMul", ["m", "vector"], ["matvec"]),
        node("MatMul", ["batch", "matrix"], ["batch_by_matrix"]),
        node("MatMul", ["batch", "batch_t"], ["batched"]),
        node("MatMul", ["single", "batch_t"], ["broadcast"]),
    ]
    weights = {
        "gemm_b": weight(rng, 3, 6),
        "gemm_c": weight(rng, 1, 6),
        "row_c": weight(rng, 5),
        "vector": weight(rng, 4),
        "matrix": weight(rng, 4, 3),
    }
    inputs = {
        "a": [3, 4],
        "m": [2, 4],
        "n": [5, 4],
        "batch": [2, 3, 2, 4],
        "batch_t": [2, 3, 4, 5],
        "single": [1, 1, 6, 4],
    }
    outputs = [n.output[0] for n in nodes]
    return make_model(nodes, inputs, outputs, weights)


def normalization(rng: np.random.Generator) -> onnx.ModelProto:
    """LayerNormalization over two axes with a broadcast scale, ReduceMean, LRN, and
    BatchNormalization of a 2-D input."""
    nodes = [
        node("LayerNormalization", ["x", "ln_scale"], ["ln"], axis=-2, epsilon=1e-3),
        node("ReduceMean", ["x"], ["mean_kept"], axes=[1]),
        node("ReduceMean", ["x"], ["mean_dropped"], axes=[-1, 0], keepdims=0),
        node("LRN", ["image"], ["lrn"], size=3, alpha=0.01, beta=0.6, bias=1.5),
        _bn_node("rows", "bn", "bn"),
    ]
    weights = {
        "ln_scale": rng.uniform(0.5, 1.5, (1, 5)).astype(np.float32),
        **_batch_norm(rng, "bn", 4),
    }
    inputs = {"x": [2, 3, 5], "image": [1, 6, 4, 4], "rows": [3, 4]}
    outputs = ["ln", "mean_kept", "mean_dropped", "lrn", "bn"]
    return make_model(nodes, inputs, outputs, weights, opset=17)


def layout(rng: np.random.Generator) -> onnx.ModelProto:
    """Data movement: Reshape with a 0 and a -1, Transpose, Concat with a constant,
    Identity, Dropout, Squeeze/Unsqueeze, Flatten and Pad."""
    nodes = [
        node("Reshape", ["x", "target"], ["reshaped"]),
        node("Transpose", ["reshaped"], ["transposed"], perm=[1, 0, 2]),
        node("Identity", ["transposed"], ["same"]),
        node("Dropout", ["same"], ["dropped"]),
        node("Concat", ["dropped", "block"], ["joined"], axis=-1),
        node("Unsqueeze", ["joined", "axis0"], ["unsqueezed"]),
        node("Squeeze", ["unsqueezed", "axis0"], ["squeezed"]),
        node("Flatten", ["squeezed"], ["flat"], axis=-1),
        node("Pad", ["flat", "pads", "pad_value"], ["padded"]),
        node("Identity", ["x"], ["passthrough"]),
    ]
    weights = {
        "target": ints(0, -1, 2),
        "block": weight(rng, 6, 2, 3),
        "axis0": ints(0),
        "pads": ints(1, 0, 0, 2),
        "pad_value": scalar(-1.5),
    }
    return make_model(nodes, {"x": [2, 3, 4]}, ["padded", "passthrough"], weights)


def shape_arithmetic(rng: np.random.Generator) -> onnx.ModelProto:
    """What exporters write for ``x.view(x.size(0), -1)``: Shape -> Gather ->
    Unsqueeze -> Concat -> Reshape, all folded at import; then ConstantOfShape and a
    Constant node."""
    fill = numpy_helper.from_array(np.array([0.25], np.float32))
    nodes = [
        node("Shape", ["x"], ["shape"]),
        node("Gather", ["shape", "zero"], ["batch"], axis=0),
        node("Unsqueeze", ["batch", "axis0"], ["batch_1d"]),
        node("Concat", ["batch_1d", "minus_one"], ["target"], axis=0),
        node("Reshape", ["x", "target"], ["flat"]),
        node("Shape", ["flat"], ["flat_shape"]),
        node("ConstantOfShape", ["flat_shape"], ["quarter"], value=fill),
        node("Add", ["flat", "quarter"], ["shifted"]),
        node("Constant", [], ["scale"], value=numpy_helper.from_array(weight(rng, 12, fan_in=1))),
        node("Mul", ["shifted", "scale"], ["out"]),
    ]
    weights = {"zero": np.array(0, np.int64), "axis0": ints(0), "minus_one": ints(-1)}
    return make_model(nodes, {"x": [2, 3, 4]}, ["out"], weights)


def folded_constants(rng: np.random.Generator) -> onnx.ModelProto:
    """Everything around one MatMul is known at import: a transposed weight, and an
    addend made by Shape, Slice, Squeeze, Range, Cast, Equal, Where and Expand; a
    Sqrt of a constant scales the sum."""
    nodes = [
        node("Transpose", ["w"], ["w_t"], perm=[1, 0]),
        node("MatMul", ["x", "w_t"], ["y"]),
        node("Shape", ["y"], ["y_shape"]),
        node("Slice", ["y_shape", "one_i", "two_i"], ["columns_1d"]),
        node("Squeeze", ["columns_1d"], ["columns"]),
        node("Range", ["zero_i", "columns", "step_i"], ["positions"]),
        node("Cast", ["positions"], ["positions_f"], to=TensorProto.FLOAT),
        node("Equal", ["positions", "two_scalar_i"], ["is_two"]),
        node("Where", ["is_two", "ten", "positions_f"], ["row"]),
        node("Expand", ["row", "y_shape"], ["addend"]),
        node("Add", ["y", "addend"], ["shifted"]),
        node("Sqrt", ["four"], ["two"]),
        node("Mul", ["shifted", "two"], ["out"]),
    ]
    weights = {
        "w": weight(rng, 4, 6),
        "one_i": ints(1),
        "two_i": ints(2),
        "zero_i": np.array(0, np.int64),
        "step_i": np.array(1, np.int64),
        "two_scalar_i": np.array(2, np.int64),
        "ten": scalar(10.0),
        "four": scalar(4.0),
    }
    return make_model(nodes, {"x": [2, 6]}, ["out"], weights)


def recent_opset(rng: np.random.Generator) -> onnx.ModelProto:
    """Opset 18, where ReduceMean takes its axes and Pad the axes it pads as inputs."""
    nodes = [
        node("ReduceMean", ["x", "axis1"], ["mean"], keepdims=0),
        node("Pad", ["x", "pads", "pad_value", "last_axis"], ["padded"]),
    ]
    weights = {
        "axis1": ints(1),
        "pads": ints(1, 2),
        "pad_value": scalar(0.5),
        "last_axis": ints(-1),
    }
    return make_model(nodes, {"x": [2, 3, 4]}, ["mean", "padded"], weights, opset=18)


def legacy_opset(rng: np.random.Generator) -> onnx.ModelProto:
    """Opset 9 as old exporters wrote it: the weights listed among the graph inputs,
    Clip bounds, Unsqueeze axes and Pad widths as attributes, and Softmax on 3-D input,
    which before opset 13 normalizes over every axis from ``axis`` on."""
    nodes = [
        node("Gemm", ["x", "w", "b"], ["h"], transB=1),
        node("Clip", ["h"], ["clipped"], min=-0.5, max=0.5),
        node("Unsqueeze", ["clipped"], ["h3"], axes=[0]),
        node("Pad", ["h3"], ["padded"], pads=[0, 0, 1, 0, 0, 0], value=0.25),
        node("Softmax", ["padded"], ["probs"], axis=1),
        node("Squeeze", ["probs"], ["out"], axes=[0]),
    ]
    weights = {"w": weight(rng, 6, 5), "b": weight(rng, 6, fan_in=5)}
    return make_model(nodes, {"x": [3, 5]}, ["out"], weights, opset=9, initializers_as_inputs=True)


OP_MODELS: dict[str, Builder] = {
    "conv_variants": conv_variants,
    "pooling": pooling,
    "activations": activations,
    "gelu": gelu,
    "arithmetic": arithmetic,
    "products": products,
    "normalization": normalization,
    "layout": layout,
    "shape_arithmetic": shape_arithmetic,
    "folded_constants": folded_constants,
    "recent_opset": recent_opset,
    "legacy_opset": legacy_opset,
}

MODELS: dict[str, Builder] = {
    "mlp": mlp,
    "resnet_block": resnet_block,
    "transformer_layer": transformer_layer,
    "repeated_blocks": repeated_blocks,
    **OP_MODELS,
}


# ---- models the importer must refuse, or needs help with ------------------------------------


def dynamic_batch(rng: np.random.Generator) -> onnx.ModelProto:
    """Gemm + Relu on an input whose batch dimension is the symbol 'batch'."""
    nodes = [node("Gemm", ["x", "w"], ["h"], transB=1), node("Relu", ["h"], ["y"])]
    return make_model(nodes, {"x": ["batch", 8]}, ["y"], {"w": weight(rng, 4, 8)})


def unsupported_ops(rng: np.random.Generator) -> onnx.ModelProto:
    """Relu, then TopK and NonMaxSuppression, which the importer does not convert."""
    nodes = [
        node("Relu", ["scores"], ["relu"]),
        node("TopK", ["relu", "k"], ["top_values", "top_indices"], axis=-1),
        node("NonMaxSuppression", ["boxes", "relu"], ["selected"]),
    ]
    graph = helper.make_graph(
        nodes,
        "model",
        [
            helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 1, 4]),
            helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 4, 4]),
        ],
        [
            helper.make_tensor_value_info("top_values", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("selected", TensorProto.INT64, None),
        ],
        [numpy_helper.from_array(ints(2), "k")],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=_IR_VERSION
    )
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    onnx.checker.check_model(model)
    return model


def missing_value() -> onnx.ModelProto:
    """A node that reads a value no node makes (not checked: it is malformed)."""
    nodes = [node("Relu", ["x"], ["r"]), node("Add", ["r", "nowhere"], ["y"])]
    return make_model(nodes, {"x": [2, 3]}, ["y"], check=False)


def unknown_attribute() -> onnx.ModelProto:
    """A Relu given an attribute Relu does not have (not checked: it is malformed)."""
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu", alpha=0.5)]
    return make_model(nodes, {"x": [2, 3]}, ["y"], check=False)


def mistyped_attribute() -> onnx.ModelProto:
    """A Transpose whose perm is floats, not ints (not checked: it is malformed)."""
    nodes = [helper.make_node("Transpose", ["x"], ["y"], name="transpose", perm=[1.0, 0.0])]
    return make_model(nodes, {"x": [2, 3]}, ["y"], check=False)


def unnamed_bad_conv(rng: np.random.Generator) -> onnx.ModelProto:
    """An unnamed Conv (the third node) whose strides list one value for two axes."""
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Relu", ["a"], ["b"]),
        helper.make_node("Conv", ["b", "w"], ["y"], strides=[2]),
    ]
    return make_model(
        nodes, {"x": [1, 2, 5, 5]}, ["y"], {"w": weight(rng, 3, 2, 3, 3)}, check=False
    )
