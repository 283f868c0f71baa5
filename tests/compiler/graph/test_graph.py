"""The graph IR's passes, fusion and executor on graphs written by hand, against numpy
on random inputs and weights."""

from __future__ import annotations

import math

import numpy as np
import pytest
from graph_builder import CONV, GraphBuilder

from compiler.graph import GraphError, GraphModule, Node, fuse, optimize
from compiler.graph.passes import fold_scale_into_conv
from compiler.schedule.default import schedule_by_default
from compiler.topi.reference import conv2d_nchw_im2col


def conv_bn_relu(rng: np.random.Generator, channels: int = 6) -> tuple[GraphBuilder, dict]:
    """x -> conv (+bias) -> batch norm as multiply/add -> + residual -> relu."""
    weights = {
        "w": rng.standard_normal((channels, 4, 3, 3)),
        "bias": rng.standard_normal((channels, 1, 1)),
        "scale": rng.random((channels, 1, 1)) + 0.5,
        "shift": rng.standard_normal((channels, 1, 1)),
    }
    b = GraphBuilder()
    x = b.input("x", (1, 4, 9, 9))
    skip = b.input("skip", (1, channels, 9, 9))
    for name, array in weights.items():
        b.constant(name, array)
    b.node("conv2d", x, "w", out="conv", **CONV)
    b.node("add", "conv", "bias", out="biased")
    b.node("multiply", "biased", "scale", out="scaled")
    b.node("add", "scaled", "shift", out="normed")
    b.node("add", "normed", skip, out="summed")
    b.node("relu", "summed", out="y")
    return b, {k: v.astype("float32") for k, v in weights.items()}


def reference(x: np.ndarray, skip: np.ndarray, w: dict) -> np.ndarray:
    conv = conv2d_nchw_im2col(x, w["w"], 1, 1)
    return np.maximum((conv + w["bias"]) * w["scale"] + w["shift"] + skip, 0)


def test_batch_norm_folds_into_the_convolution_and_fuses_with_its_epilogue(rng) -> None:
    b, weights = conv_bn_relu(rng)
    graph = b.returns("y")
    folded = fold_scale_into_conv(graph)
    assert [node.op for node in folded.nodes] == ["conv2d", "add", "add", "relu"]
    assert len(graph.nodes) == 6 and "scale" in graph.constants  # the input graph is kept
    (group,) = fuse(folded)
    assert group.name == "conv2d_add_add_relu"
    x = rng.standard_normal((1, 4, 9, 9)).astype("float32")
    skip = rng.standard_normal((1, 6, 9, 9)).astype("float32")
    (y,) = GraphModule(graph).run(x=x, skip=skip).values()
    np.testing.assert_allclose(y, reference(x, skip, weights), rtol=1e-4, atol=1e-4)


def test_a_value_read_twice_or_returned_ends_its_group(rng) -> None:
    b, _ = conv_bn_relu(rng)
    b.node("sigmoid", "normed", out="gate")  # "normed" now has two readers
    b.node("multiply", "y", "gate", out="gated")
    graph = b.returns("gated", "y")
    _, groups = optimize(graph)
    names = [group.name for group in groups]
    # the bias and shift merge into one add; "normed" ends the convolution's group, "y"
    # (a model output) ends the residual one, and the gate takes the multiply
    assert names == ["conv2d_add", "add_relu", "sigmoid_multiply"]
    assert groups[-1].inputs == ("normed", "y")


def test_gelu_reading_its_input_twice_is_the_dense_layers_epilogue(rng) -> None:
    """GELU, ``h * (1 + erf(h / sqrt 2)) / 2``, reads the dense layer's biased output
    ``h`` twice: it joins the dense layer's group, and the default schedule computes it
    from the register tile as the tile is written back (no block of its own, no
    buffer for ``h``)."""
    b = GraphBuilder()
    x = b.input("x", (64, 96))
    b.constant("w", rng.standard_normal((256, 96)))
    b.constant("bias", rng.standard_normal(256))
    for name, value in (("root2", math.sqrt(2)), ("one", 1.0), ("half", 0.5)):
        b.constant(name, np.array(value))
    b.node("dense", x, "w", out="d")
    b.node("add", "d", "bias", out="h")
    b.node("divide", "h", "root2", out="s")
    b.node("erf", "s", out="e")
    b.node("add", "e", "one", out="e1")
    b.node("multiply", "h", "e1", out="g")
    b.node("multiply", "g", "half", out="y")
    graph = b.returns("y")
    (group,) = fuse(graph)
    assert group.name == "dense_add_divide_erf_add_multiply_multiply"
    sch = schedule_by_default(group.prim_func(graph))
    blocks = [block.name for block in sch.get_child_blocks(sch.get_block("root"))]
    assert blocks == ["p1_layout", "T_dense_init", "T_dense", "T_dense_local"]
    x_value = rng.standard_normal((64, 96)).astype("float32")
    (y,) = GraphModule(graph).run(x=x_value).values()
    h = x_value @ graph.constants["w"].T + graph.constants["bias"]
    expected = h * (1 + np.vectorize(math.erf)(h / math.sqrt(2))) / 2
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)


def test_a_reduction_stays_alone_and_groups_run_after_what_they_read(rng) -> None:
    b = GraphBuilder()
    x = b.input("x", (4, 16))
    b.constant("w", rng.standard_normal((8, 16)))
    b.node("exp", x, out="e")
    b.node("dense", x, "w", out="d")
    b.node("softmax", "d", out="sm", axis=-1)
    b.node("relu", "sm", out="r")
    graph = b.returns("r", "e")
    groups = fuse(graph)
    assert [g.name for g in groups] == ["exp", "dense", "softmax", "relu"]
    x_value = rng.standard_normal((4, 16)).astype("float32")
    out = GraphModule(graph).run(x=x_value)
    logits = x_value @ graph.constants["w"].T
    soft = np.exp(logits - logits.max(-1, keepdims=True))
    np.testing.assert_allclose(out["r"], soft / soft.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["e"], np.exp(x_value), rtol=1e-5)


def test_repeated_blocks_are_one_workload_built_once(rng) -> None:
    b = GraphBuilder()
    value = b.input("x", (1, 4, 8, 8))
    for k in range(3):
        b.constant(f"w{k}", rng.standard_normal((4, 4, 3, 3)))
        b.node("conv2d", value, f"w{k}", out=f"c{k}", **CONV)
        value = b.node("relu", f"c{k}", out=f"r{k}")
    # NCHW: blocked, the first block would read the NCHW input in place, a workload
    # of its own
    module = GraphModule(b.returns(value), conv_block=0)
    assert len(module.plan.steps) == 3
    assert {step.function for step in module.plan.steps} == {"f0"}
    # Untuned, a 3x3 convolution of a small image runs as Winograd's F(2x2, 3x3),
    # its kernel transformed once per weight by the one pack function.
    assert set(module.module) == {"f0", "f0__pack_p1"}
    x = rng.standard_normal((1, 4, 8, 8)).astype("float32")
    expected = x
    for k in range(3):
        expected = np.maximum(conv2d_nchw_im2col(expected, b.graph.constants[f"w{k}"], 1, 1), 0)
    np.testing.assert_allclose(module.run(x=x)["r2"], expected, rtol=1e-4, atol=1e-4)


def test_inputs_of_the_wrong_name_shape_or_dtype_are_refused_naming_them(rng) -> None:
    b = GraphBuilder()
    b.node("relu", b.input("x", (2, 3)), out="y")
    module = GraphModule(b.returns("y"))
    with pytest.raises(GraphError, match="missing: x"):
        module.run()
    with pytest.raises(GraphError, match="unknown: z"):
        module.run(x=np.zeros((2, 3), "float32"), z=np.zeros(1))
    with pytest.raises(GraphError, match=r"input 'x': the model takes \(2, 3\) float32"):
        module.run(x=np.zeros((3, 2), "float32"))
    with pytest.raises(GraphError, match="float64"):
        module.run(x=np.zeros((2, 3)))


def test_a_graph_that_uses_a_value_before_making_it_is_refused() -> None:
    b = GraphBuilder()
    b.input("x", (2,))
    graph = b.graph
    graph.nodes.append(Node("relu", ("y",), "z"))
    graph.outputs = ("z",)
    with pytest.raises(GraphError, match="'y' is used before it is made"):
        GraphModule(graph)


def test_an_exported_model_loads_back_and_computes_the_same(rng, tmp_path) -> None:
    b, _ = conv_bn_relu(rng)
    module = GraphModule(b.returns("y"))
    module.export(tmp_path / "model")
    assert sorted(p.name for p in (tmp_path / "model").iterdir()) == [
        "model.so",
        "plan.json",
        "weights.npz",
    ]
    loaded = GraphModule.load(tmp_path / "model")
    assert loaded.plan == module.plan
    x = rng.standard_normal((1, 4, 9, 9)).astype("float32")
    skip = rng.standard_normal((1, 6, 9, 9)).astype("float32")
    np.testing.assert_array_equal(loaded.run(x=x, skip=skip)["y"], module.run(x=x, skip=skip)["y"])


def test_a_profile_gives_each_step_its_time(rng) -> None:
    b, _ = conv_bn_relu(rng)
    b.node("global_avg_pool2d", "y", out="pooled")
    module = GraphModule(b.returns("pooled"))
    x = rng.standard_normal((1, 4, 9, 9)).astype("float32")
    skip = rng.standard_normal((1, 6, 9, 9)).astype("float32")
    profile = module.profile(runs=3, x=x, skip=skip)
    assert [step.kind for step, _ in profile] == [
        "conv2d_add_add_relu[winograd2]",
        "global_avg_pool2d",
    ]
    assert all(seconds > 0 for _, seconds in profile)
