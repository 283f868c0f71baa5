"""The ONNX importer alone: every model of ``onnx_models`` imports into a Graph that
holds together, whose output types are the shapes onnxruntime computes, and which a
small numpy interpreter of the graph operators runs to onnxruntime's results. That
proves the import faithful with no code generation in the way. Then the errors: an
unsupported operator, a dynamic dimension, a malformed model.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx_models
import onnxruntime
import pytest
from file_opens import files_opened

import compiler
from compiler import te
from compiler.graph.ir import Graph, GraphError
from compiler.graph.onnx_import import UnsupportedOperatorError, import_onnx
from compiler.graph.ops import OPS
from compiler.topi.reference import NUMPY_REFERENCES, conv2d_nchw_im2col

# ---- a numpy interpreter of the graph operators ---------------------------------------------

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _reference(op: str, *inputs: np.ndarray, **args: Any) -> np.ndarray:
    return NUMPY_REFERENCES[op].compute(*inputs, **args)[0]


def _lrn(x: np.ndarray, size: int, alpha: float, beta: float, bias: float) -> np.ndarray:
    """ONNX's definition: the sum of squares over the channels [c - (size-1)//2,
    c + size//2], cut at the edges."""
    squares = np.zeros_like(x)
    channels = x.shape[1]
    for c in range(channels):
        low, high = max(0, c - (size - 1) // 2), min(channels, c + size // 2 + 1)
        squares[:, c] = (x[:, low:high] ** 2).sum(axis=1)
    return x / (bias + alpha / size * squares) ** beta


NUMPY_OPS: dict[str, Callable[..., np.ndarray]] = {
    "relu": lambda x: np.maximum(x, 0.0),
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "tanh": np.tanh,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "abs": np.abs,
    "negative": np.negative,
    "gelu": lambda x: 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0))),
    "erf": _erf,
    "clip": lambda x, low, high: np.clip(
        x, -np.inf if low is None else low, np.inf if high is None else high
    ),
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "power": np.power,
    "conv2d": lambda x, w, stride, padding, dilation, groups: conv2d_nchw_im2col(
        x, w, stride, padding, dilation, groups
    ),
    "dense": lambda x, w: x @ w.T,
    "matmul": lambda a, b, transpose_b=False: a @ (np.swapaxes(b, -1, -2) if transpose_b else b),
    "max_pool2d": lambda x, kernel, stride, padding: _reference(
        "max_pool2d", x, kernel=kernel, stride=stride, padding=padding
    ),
    "avg_pool2d": lambda x, kernel, stride, padding, count_include_pad: _reference(
        "avg_pool2d",
        x,
        kernel=kernel,
        stride=stride,
        padding=padding,
        count_include_pad=count_include_pad,
    ),
    "global_avg_pool2d": lambda x: x.mean(axis=(2, 3), keepdims=True),
    "softmax": lambda x, axis: _reference("softmax", x, axis=axis),
    "layer_norm": lambda x, gamma, beta, axis, epsilon: _reference(
        "layer_norm",
        x,
        gamma,
        beta,
        axis=list(axis) if isinstance(axis, tuple) else axis,
        epsilon=epsilon,
    ),
    "mean": lambda x, axis, keepdims: x.mean(axis=tuple(axis), keepdims=keepdims),
    "reshape": lambda x, shape: x.reshape(shape),
    "transpose": lambda x, axes: np.transpose(x, axes),
    "concatenate": lambda *xs, axis: np.concatenate(xs, axis=axis),
    "pad": lambda x, before, after, value: np.pad(
        x, list(zip(before, after, strict=True)), constant_values=value
    ),
    "lrn": _lrn,
}


def interpret(graph: Graph, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every output of ``graph`` on ``inputs``, computed in float64; each node's result
    must have the type the importer gave it."""
    values = {name: a.astype(np.float64) for name, a in {**graph.constants, **inputs}.items()}
    for node in graph.nodes:
        result = np.asarray(NUMPY_OPS[node.op](*(values[v] for v in node.inputs), **node.attrs))
        assert result.shape == graph.types[node.output].shape, str(node)
        values[node.output] = result
    return {name: values[name] for name in graph.outputs}


# ---- helpers ---------------------------------------------------------------------------------


def onnxruntime_outputs(
    model: onnx.ModelProto, inputs: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # not the warning that old models list weights as inputs
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    names = [output.name for output in session.get_outputs()]
    return dict(zip(names, session.run(names, dict(inputs)), strict=True))


def random_inputs(graph: Graph, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {
        name: rng.standard_normal(t.shape).astype(np.float32) for name, t in graph.inputs.items()
    }


def check_against_onnxruntime(graph: Graph, model: onnx.ModelProto, seed: int) -> None:
    inputs = random_inputs(graph, np.random.default_rng(seed))
    want = onnxruntime_outputs(model, inputs)
    got = interpret(graph, inputs)
    assert list(got) == list(want)
    for name, expected in want.items():
        assert graph.types[name].shape == expected.shape, name
        np.testing.assert_allclose(got[name], expected, rtol=1e-4, atol=1e-5, err_msg=name)


# ---- every model imports faithfully ----------------------------------------------------------


@pytest.mark.parametrize("name", list(onnx_models.MODELS))
def test_model_imports_to_what_onnxruntime_computes(name: str, rng: np.random.Generator) -> None:
    model = onnx_models.MODELS[name](rng)
    graph = import_onnx(model)
    graph.check()
    assert all(t.dtype == "float32" for t in graph.types.values())
    assert set(graph.inputs) == {v.name for v in model.graph.input} - {
        t.name for t in model.graph.initializer
    }
    check_against_onnxruntime(graph, model, seed=len(name))


def test_shape_arithmetic_folds_away(rng: np.random.Generator) -> None:
    graph = import_onnx(onnx_models.shape_arithmetic(rng))
    assert [node.op for node in graph.nodes] == ["reshape", "add", "multiply"]
    assert graph.nodes[0].attrs == {"shape": (2, 12)}
    assert all(a.dtype == np.float32 for a in graph.constants.values())


def test_constant_subgraphs_fold_into_constants(rng: np.random.Generator) -> None:
    graph = import_onnx(onnx_models.folded_constants(rng))
    assert [node.op for node in graph.nodes] == ["matmul", "add", "multiply"]
    addend = graph.constants[graph.nodes[1].inputs[1]]
    np.testing.assert_array_equal(addend, [[0, 1, 10, 3]] * 2)


def test_a_weight_transposed_by_the_model_is_transposed_at_import(
    rng: np.random.Generator,
) -> None:
    w = onnx_models.weight(rng, 6, 4)
    nodes = [
        onnx_models.node("Transpose", ["w"], ["w_t"], perm=[1, 0]),
        onnx_models.node("Gemm", ["x", "w_t"], ["y"]),
    ]
    model = onnx_models.make_model(nodes, {"x": [3, 4]}, ["y"], {"w": w})
    graph = import_onnx(model)
    (dense,) = graph.nodes
    assert dense.op == "dense"
    np.testing.assert_array_equal(graph.constants[dense.inputs[1]], w)
    check_against_onnxruntime(graph, model, seed=1)


def test_batch_norm_becomes_a_per_channel_multiply_and_add(rng: np.random.Generator) -> None:
    graph = import_onnx(onnx_models.resnet_block(rng))
    ops = [node.op for node in graph.nodes]
    assert ops[:4] == ["conv2d", "add", "multiply", "add"]
    bias, scale, shift = (graph.nodes[k].inputs[1] for k in (1, 2, 3))
    assert {graph.constants[c].shape for c in (bias, scale, shift)} == {(8, 1, 1)}


def test_gemm_with_a_constant_b_is_dense_with_an_n_by_k_weight(rng: np.random.Generator) -> None:
    graph = import_onnx(onnx_models.mlp(rng))
    dense = [node for node in graph.nodes if node.op == "dense"]
    assert [graph.constants[node.inputs[1]].shape for node in dense] == [(32, 16), (10, 32)]


def test_outputs_keep_their_names_and_unnamed_nodes_are_numbered(
    rng: np.random.Generator,
) -> None:
    model = onnx_models.make_model(
        [onnx.helper.make_node("Relu", ["x"], ["y"]), onnx.helper.make_node("Tanh", ["y"], ["z"])],
        {"x": [2, 2]},
        ["z", "y"],
    )
    graph = import_onnx(model)
    assert graph.outputs == ("z", "y")
    assert [(node.name, node.output) for node in graph.nodes] == [
        ("#0 Relu", "y"),
        ("#1 Tanh", "z"),
    ]


def test_import_from_a_path_and_from_bytes(rng: np.random.Generator, tmp_path: Path) -> None:
    model = onnx_models.mlp(rng)
    path = tmp_path / "mlp.onnx"
    onnx.save(model, path)
    want = str(import_onnx(model))
    assert str(import_onnx(path)) == want
    assert str(import_onnx(str(path))) == want
    assert str(import_onnx(model.SerializeToString())) == want


def test_not_a_model_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(GraphError, match="no such ONNX file"):
        import_onnx(tmp_path / "missing.onnx")
    with pytest.raises(GraphError, match="not a serialized ONNX model"):
        import_onnx(b"\x00\x01 not protobuf \xff\xff")


def test_lrn_builds_and_runs_as_onnx_defines_it(rng: np.random.Generator) -> None:
    """The graph op against the numpy definition at an odd and an even size, and the
    definition against onnxruntime (which takes odd sizes only)."""
    data = rng.standard_normal((1, 5, 3, 3)).astype(np.float32)
    for size in (3, 4):
        attrs: dict[str, Any] = {"size": size, "alpha": 0.02, "beta": 0.75, "bias": 2.0}
        x = te.placeholder(data.shape, "float32", name="x")
        result = np.empty(data.shape, np.float32)
        compiler.build(te.create_prim_func([x, OPS["lrn"].build([x], attrs)]))(data, result)
        want = _lrn(data.astype(np.float64), **attrs)
        np.testing.assert_allclose(result, want, rtol=1e-5, atol=1e-6)
    model = onnx_models.make_model(
        [onnx_models.node("LRN", ["x"], ["y"], size=3, alpha=0.02, beta=0.75, bias=2.0)],
        {"x": list(data.shape)},
        ["y"],
    )
    ours = _lrn(data.astype(np.float64), size=3, alpha=0.02, beta=0.75, bias=2.0)
    np.testing.assert_allclose(ours, onnxruntime_outputs(model, {"x": data})["y"], rtol=1e-5)


# ---- static shapes ---------------------------------------------------------------------------


def test_a_dynamic_dimension_names_the_input_and_the_fix(rng: np.random.Generator) -> None:
    with pytest.raises(GraphError) as raised:
        import_onnx(onnx_models.dynamic_batch(rng))
    message = str(raised.value)
    assert "input 'x' has a dynamic dimension 0 ('batch')" in message
    assert 'shapes={"x": (1, 8)}' in message
    assert "--shape x=1,8" in message


def test_shapes_fix_a_dynamic_dimension(rng: np.random.Generator) -> None:
    model = onnx_models.dynamic_batch(rng)
    graph = import_onnx(model, shapes={"x": (3, 8)})
    assert graph.inputs["x"].shape == (3, 8)
    check_against_onnxruntime(graph, model, seed=3)


@pytest.mark.parametrize(
    ("shapes", "match"),
    [
        ({"y": (1, 8)}, "shapes names 'y', which the model has no input of; its inputs are: 'x'"),
        ({"x": (1, 8, 1)}, "gives input 'x' 3 dimensions"),
        ({"x": (2, 9)}, "dimension 1 = 9, but the model fixes it at 8"),
    ],
)
def test_shapes_that_do_not_fit_are_refused(
    rng: np.random.Generator, shapes: dict[str, tuple[int, ...]], match: str
) -> None:
    with pytest.raises(GraphError, match=match):
        import_onnx(onnx_models.dynamic_batch(rng), shapes=shapes)


# ---- what the importer refuses ---------------------------------------------------------------


def test_unsupported_operators_are_all_named_before_anything_converts(
    rng: np.random.Generator,
) -> None:
    model = onnx_models.unsupported_ops(rng)
    serialized = model.SerializeToString()
    with pytest.raises(UnsupportedOperatorError) as raised:
        import_onnx(model)
    assert model.SerializeToString() == serialized
    error = raised.value
    assert (error.op_type, error.node) == ("TopK", "top_values_node")
    assert "node 'top_values_node' (TopK): the ONNX operator TopK is not supported" in str(error)
    assert "nor is NonMaxSuppression (node 'selected_node')" in str(error)
    assert "The supported operators are: Abs, Add," in str(error)
    assert isinstance(error, GraphError)


def test_a_run_time_value_an_operator_needs_at_import_is_refused(
    rng: np.random.Generator,
) -> None:
    nodes = [onnx_models.node("Reshape", ["x", "shape"], ["y"])]
    model = onnx_models.make_model(nodes, {"x": [2, 3], "shape": [2]}, ["y"])
    with pytest.raises(
        UnsupportedOperatorError, match="input 1 \\(shape, 'shape'\\) must be known"
    ):
        import_onnx(model)


def test_an_int_value_computed_at_run_time_is_refused(rng: np.random.Generator) -> None:
    nodes = [onnx_models.node("Cast", ["x"], ["y"], to=onnx.TensorProto.INT64)]
    model = onnx_models.make_model(nodes, {"x": [2, 3]}, ["y"], check=False)
    with pytest.raises(UnsupportedOperatorError, match="node 'y_node' \\(Cast\\)"):
        import_onnx(model)


def _reflect_pad() -> onnx.ModelProto:
    nodes = [onnx_models.node("Pad", ["x", "pads"], ["y"], mode="reflect")]
    return onnx_models.make_model(
        nodes, {"x": [2, 3]}, ["y"], {"pads": onnx_models.ints(0, 1, 0, 1)}
    )


def _conv1d() -> onnx.ModelProto:
    w = np.ones((2, 3, 3), np.float32)
    nodes = [onnx_models.node("Conv", ["x", "w"], ["y"])]
    return onnx_models.make_model(nodes, {"x": [1, 3, 8]}, ["y"], {"w": w})


def _used_dropout_mask() -> onnx.ModelProto:
    nodes = [
        onnx_models.node("Dropout", ["x"], ["y", "mask"]),
        onnx_models.node("Cast", ["mask"], ["z"], to=onnx.TensorProto.FLOAT),
    ]
    return onnx_models.make_model(nodes, {"x": [2, 3]}, ["y", "z"])


def _partly_broadcast_matmul() -> onnx.ModelProto:
    nodes = [onnx_models.node("MatMul", ["a", "b"], ["y"])]
    return onnx_models.make_model(nodes, {"a": [2, 1, 3, 4], "b": [1, 5, 4, 2]}, ["y"])


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (_reflect_pad, "node 'y_node' \\(Pad\\): mode 'reflect'; only 'constant' padding"),
        (_conv1d, "node 'y_node' \\(Conv\\): only 2-D images \\(4-D NCHW input\\)"),
        (_used_dropout_mask, "output 'mask' is used, but only the first output of Dropout is"),
        (
            _partly_broadcast_matmul,
            "batch dimensions \\(2, 1\\) broadcast to \\(2, 5\\) only in part",
        ),
    ],
)
def test_a_use_of_an_operator_the_importer_cannot_convert_is_named(
    build: Callable[[], onnx.ModelProto], match: str
) -> None:
    with pytest.raises(UnsupportedOperatorError, match=match):
        import_onnx(build())


def test_ceil_mode_that_adds_a_window_is_refused(rng: np.random.Generator) -> None:
    nodes = [
        onnx_models.node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], ceil_mode=1, strides=[2, 2])
    ]
    model = onnx_models.make_model(nodes, {"x": [1, 1, 5, 5]}, ["y"])
    with pytest.raises(UnsupportedOperatorError, match="ceil_mode=1 adds a partial window"):
        import_onnx(model)


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (
            onnx_models.missing_value,
            "node 'y_node' \\(Add\\): input 'nowhere' is made by no earlier node",
        ),
        (
            onnx_models.unknown_attribute,
            "node 'relu' \\(Relu\\): Relu \\(opset 17\\) has no attribute 'alpha'",
        ),
        (
            onnx_models.mistyped_attribute,
            "node 'transpose' \\(Transpose\\): attribute 'perm' is FLOATS, but Transpose "
            "takes INTS",
        ),
    ],
)
def test_a_malformed_model_names_the_node(build: Callable[[], onnx.ModelProto], match: str) -> None:
    with pytest.raises(GraphError, match=match):
        import_onnx(build())


def test_an_unnamed_node_is_named_by_its_index(rng: np.random.Generator) -> None:
    with pytest.raises(GraphError, match="node #2 Conv: attribute 'strides' must list 2 ints"):
        import_onnx(onnx_models.unnamed_bad_conv(rng))


# ---- tensors whose data lies in another file ---------------------------------------------


def _with_external_weight(rng: np.random.Generator, where: str, location: str) -> onnx.ModelProto:
    """The MLP, with one tensor's data named as lying in ``location``: an initializer,
    or the value of a Constant node that adds to the output."""
    model = onnx_models.mlp(rng)
    if where == "initializer":
        onnx_models.external_data(model.graph.initializer[0], location)
        return model
    value = onnx.numpy_helper.from_array(np.ones((4, 10), np.float32))
    onnx_models.external_data(value, location)
    model.graph.node[-1].output[0] = "unshifted"
    model.graph.node.extend(
        [
            onnx.helper.make_node("Constant", [], ["shift"], name="shift_node", value=value),
            onnx.helper.make_node("Add", ["unshifted", "shift"], ["probs"], name="add_node"),
        ]
    )
    return model


@pytest.mark.parametrize(
    ("where", "named"),
    [("initializer", "the initializer 'w1'"), ("constant", "'value' of node 'shift_node'")],
)
@pytest.mark.parametrize("location", ["weights.bin", "../weights.bin", "/etc/hostname"])
def test_a_tensor_with_external_data_is_refused_before_any_file_is_opened(
    rng: np.random.Generator, tmp_path: Path, where: str, named: str, location: str
) -> None:
    model = _with_external_weight(rng, where, location)
    path = tmp_path / "model.onnx"
    onnx.save_model(model, path)
    for given in (model.SerializeToString(), path):
        with files_opened() as opened, pytest.raises(GraphError) as refused:
            import_onnx(given)
        message = str(refused.value)
        assert named in message and repr(location) in message and "save_model" in message
        assert all(p.name == "model.onnx" for p in opened), opened


def test_a_model_saved_with_its_weights_apart_is_refused_by_path(
    rng: np.random.Generator, tmp_path: Path
) -> None:
    """As onnx.save writes a large model: the weights in a file beside it."""
    path = tmp_path / "model.onnx"
    onnx.save_model(
        onnx_models.mlp(rng), path, save_as_external_data=True, location="w.bin", size_threshold=0
    )
    assert (tmp_path / "w.bin").stat().st_size > 0
    with files_opened() as opened, pytest.raises(GraphError, match=r"another file \('w\.bin'\)"):
        import_onnx(path)
    assert opened == [path]
