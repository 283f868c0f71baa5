"""Convolutions in the blocked layout NCHW[x]c: the operator against numpy, the graph
pass's transforms (only at the edges of a ResNet block, none inside), and blocked
models against onnxruntime."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from onnx_models import resnet_block

import compiler
from compiler import te, topi
from compiler.graph import GraphModule, import_onnx, optimize
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
    inputs = {
        name: rng.standard_normal(kind.shape).astype(kind.dtype)
        for name, kind in graph.inputs.items()
    }
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    (expected,) = session.run(None, inputs)
    (ours,) = GraphModule(graph, conv_block=4).run(**inputs).values()
    np.testing.assert_allclose(ours, expected, rtol=1e-4, atol=1e-4)
