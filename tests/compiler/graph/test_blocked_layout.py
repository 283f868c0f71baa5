"""Convolutions in the blocked layout NCHW[x]c: the operator against numpy, the graph
pass's transforms (only at the edges of a ResNet block, none inside), and blocked
models against onnxruntime."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from graph_builder import CONV, GraphBuilder
from onnx_models import make_model, node, resnet_block, weight

import compiler
from compiler import te, topi
from compiler.graph import GraphModule, import_onnx, optimize
from compiler.graph.blocked_layout import conv_block
from compiler.topi.reference import conv2d_nchw_im2col


def blocked(x: np.ndarray, block: int) -> np.ndarray:
    n, c, h, w = x.shape
    return np.ascontiguousarray(x.reshape(n, c // block, block, h, w).transpose(0, 1, 3, 4, 2))


@pytest.mark.parametrize(("block", "stride", "padding"), [(4, 1, 1), (8, 2, 1), (2, 1, 0)])
def test_conv2d_nchwc_computes_the_nchw_convolution(block, stride, padding, rng) -> None:
    x = rng.standard_normal((1, 8, 9, 7)).astype("float32")
    w = rng.standard_normal((16, 8, 3, 3)).astype("float32")
    data = te.placeholder((1, 8 // block, 9, 7, block), "float32", name="data")
    kernel = te.placeholder((16 // block, 8 // block, 3, 3, block, block), "float32", name="kernel")
    out = topi.conv2d_nchwc(data, kernel, stride=stride, padding=padding)
    module = compiler.build(te.create_prim_func([data, kernel, out]))
    w_blocked = np.ascontiguousarray(
        w.reshape(16 // block, block, 8 // block, block, 3, 3).transpose(0, 2, 4, 5, 3, 1)
    )
    result = np.zeros(tuple(int(d) for d in out.shape), "float32")
    module(blocked(x, block), w_blocked, result)
    expected = conv2d_nchw_im2col(x, w, stride, padding)
    np.testing.assert_allclose(result, blocked(expected, block), rtol=1e-4, atol=1e-4)


def test_a_resnet_block_runs_blocked_with_transforms_only_at_its_edges(rng) -> None:
    model = resnet_block(rng)
    graph = import_onnx(model)
    optimized, groups = optimize(graph, conv_block=4)
    ops = [node.op for node in optimized.nodes]
    transforms = [node for node in optimized.nodes if node.op == "layout_transform"]
    assert ops.count("conv2d") == 0 and ops.count("conv2d_nchwc") == 2
    # in: the block's input, read by its first convolution and by the residual add;
    # out: before the pooling that needs NCHW
    assert sorted(t.attrs["to"] for t in transforms) == ["NCHW", "NCHWc", "NCHWc"]
    assert not [g for g in groups if g.anchor.op == "layout_transform"]  # read in place
    check_blocked_model(model, graph, rng, block=4)


def check_blocked_model(model, graph, rng, *, block: int) -> None:
    """The model blocked by ``block`` computes what onnxruntime does on random inputs."""
    inputs = {
        name: rng.standard_normal(kind.shape).astype(kind.dtype)
        for name, kind in graph.inputs.items()
    }
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    (expected,) = session.run(None, inputs)
    (ours,) = GraphModule(graph, conv_block=block).run(**inputs).values()
    np.testing.assert_allclose(ours, expected, rtol=1e-4, atol=1e-4)


def test_poolings_run_blocked_between_blocked_convolutions(rng) -> None:
    """An image stem: its convolution, max pool, next convolution and global pool all
    blocked; transforms only at the image and before the flatten."""
    model = make_model(
        [
            node("Conv", ["image", "w1"], ["c1"], strides=[2, 2], pads=[3, 3, 3, 3]),
            node("Relu", ["c1"], ["r1"]),
            node("MaxPool", ["r1"], ["p1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4),
            node("Conv", ["p1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
            node("AveragePool", ["c2"], ["p2"], kernel_shape=[2, 2], strides=[1, 1]),
            node("GlobalAveragePool", ["p2"], ["g"]),
            node("Flatten", ["g"], ["out"]),
        ],
        {"image": [1, 3, 32, 32]},
        ["out"],
        {
            "w1": weight(rng, 8, 3, 7, 7, fan_in=3 * 49),
            "w2": weight(rng, 8, 8, 3, 3, fan_in=8 * 9),
        },
    )
    graph = import_onnx(model)
    optimized, _ = optimize(graph, conv_block=4)
    pools = [n for n in optimized.nodes if "pool" in n.op]
    assert [len(optimized.types[p.inputs[0]].shape) for p in pools] == [5, 5, 5]
    transforms = [n.attrs["to"] for n in optimized.nodes if n.op == "layout_transform"]
    assert transforms == ["NCHWc", "NCHW"]
    check_blocked_model(model, graph, rng, block=4)


@pytest.mark.parametrize(("stride", "padding"), [(1, 1), (2, 1), (1, 0)])
def test_depthwise_conv2d_nchwc_computes_the_nchw_depthwise_convolution(
    stride, padding, rng
) -> None:
    x = rng.standard_normal((1, 8, 9, 7)).astype("float32")
    w = rng.standard_normal((8, 1, 3, 3)).astype("float32")
    data = te.placeholder((1, 2, 9, 7, 4), "float32", name="data")
    kernel = te.placeholder((2, 3, 3, 4), "float32", name="kernel")
    out = topi.depthwise_conv2d_nchwc(data, kernel, stride=stride, padding=padding)
    module = compiler.build(te.create_prim_func([data, kernel, out]))
    w_blocked = np.ascontiguousarray(w.reshape(2, 4, 3, 3).transpose(0, 2, 3, 1))
    result = np.zeros(tuple(int(d) for d in out.shape), "float32")
    module(blocked(x, 4), w_blocked, result)
    plain = te.placeholder((1, 8, 9, 7), "float32", name="plain")
    plain_kernel = te.placeholder((8, 1, 3, 3), "float32", name="plain_kernel")
    reference = topi.depthwise_conv2d_nchw(plain, plain_kernel, stride, padding)
    expected = np.zeros(tuple(int(d) for d in reference.shape), "float32")
    compiler.build(te.create_prim_func([plain, plain_kernel, reference]))(x, w, expected)
    np.testing.assert_allclose(result, blocked(expected, 4), rtol=1e-5, atol=1e-5)


def test_a_mobilenet_block_runs_blocked_through_its_depthwise_convolution(rng) -> None:
    """Pointwise, depthwise, pointwise with a residual add: transforms only at its
    edges (its input read by the first convolution and by the add, its output)."""
    model = make_model(
        [
            node("Conv", ["x", "expand"], ["e"]),
            node("Clip", ["e", "low", "high"], ["e6"]),
            node("Conv", ["e6", "dw"], ["d"], group=16, pads=[1, 1, 1, 1]),
            node("Clip", ["d", "low", "high"], ["d6"]),
            node("Conv", ["d6", "project"], ["p"]),
            node("Add", ["p", "x"], ["out"]),
        ],
        {"x": [1, 8, 12, 12]},
        ["out"],
        {
            "expand": weight(rng, 16, 8, 1, 1, fan_in=8),
            "dw": weight(rng, 16, 1, 3, 3, fan_in=9),
            "project": weight(rng, 8, 16, 1, 1, fan_in=16),
            "low": np.array(0.0, "float32"),
            "high": np.array(6.0, "float32"),
        },
    )
    graph = import_onnx(model)
    optimized, _ = optimize(graph, conv_block=4)
    ops = [n.op for n in optimized.nodes]
    assert ops.count("depthwise_conv2d_nchwc") == 1 and ops.count("conv2d_nchwc") == 2
    assert sorted(n.attrs["to"] for n in optimized.nodes if n.op == "layout_transform") == [
        "NCHW",
        "NCHWc",
        "NCHWc",
    ]
    check_blocked_model(model, graph, rng, block=4)


@pytest.mark.parametrize(
    ("channels", "blocks"),
    [
        ((32, 64), [16, 16]),
        ((32, 24, 40), [16, 8, 8]),
        ((12, 20), [4, 4]),
        ((32, 6), [16, None]),
    ],
)
def test_each_convolution_runs_in_the_widest_block_its_channels_split_into(
    channels, blocks, rng
) -> None:
    """MobileNetV2's 24 and 40 channels take 8 where 32 take 16; 6 channels split into
    no block of 4 or more, so that convolution stays NCHW. A convolution reads its
    input in the block it was made in: no transform between two blocked ones."""
    b = GraphBuilder()
    value = b.input("x", (1, 3, 8, 8))
    previous = 3
    for k, count in enumerate(channels):
        b.constant(f"w{k}", rng.standard_normal((count, previous, 3, 3)))
        value = b.node("conv2d", value, f"w{k}", out=f"c{k}", **CONV)
        previous = count
    graph = b.returns(value)
    assert [conv_block(count, 16) for count in channels] == blocks
    optimized, _ = optimize(graph)
    blocked = [n for n in optimized.nodes if n.op == "conv2d_nchwc"]
    made = [block for block in blocks if block]
    assert [optimized.types[n.output].shape[-1] for n in blocked] == made
    assert [optimized.types[n.inputs[0]].shape[-1] for n in blocked] == [3, *made[:-1]]
    assert sum(n.op == "layout_transform" for n in optimized.nodes) == 2
    x = rng.standard_normal((1, 3, 8, 8)).astype("float32")
    (got,) = GraphModule(graph).run(x=x).values()
    (plain,) = GraphModule(graph, conv_block=0).run(x=x).values()
    np.testing.assert_allclose(got, plain, rtol=1e-4, atol=1e-5 * np.abs(plain).max())
