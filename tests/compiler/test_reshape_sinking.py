"""Reshapes as views below the elementwise nodes that read them: the rewrites, the
groups they leave, and the models computing what numpy and onnxruntime do."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from graph_builder import GraphBuilder
from onnx_models import transformer_layer

from compiler.graph import GraphModule, import_onnx, optimize
from compiler.graph.reshape_sinking import sink_reshapes


def matmul_reshape_bias(rng: np.random.Generator) -> tuple[GraphBuilder, dict[str, np.ndarray]]:
    """(6, 8) @ (8, 12) -> reshape (2, 3, 12) -> + bias (12,) -> + residual -> relu."""
    weights = {"w": rng.standard_normal((8, 12)), "bias": rng.standard_normal((1, 1, 12))}
    b = GraphBuilder()
    b.input("x", (6, 8))
    b.input("skip", (2, 3, 12))
    for name, array in weights.items():
        b.constant(name, array)
    b.node("matmul", "x", "w", out="mm")
    b.node("reshape", "mm", out="r", shape=(2, 3, 12))
    b.node("add", "r", "bias", out="biased")
    b.node("add", "biased", "skip", out="summed")
    b.node("relu", "summed", out="y")
    return b, {k: v.astype("float32") for k, v in weights.items()}


def run(graph, **inputs: np.ndarray) -> np.ndarray:
    (output,) = GraphModule(graph).run(**inputs).values()
    return output


def test_the_epilogue_joins_the_matmul_and_the_reshape_becomes_a_view(rng) -> None:
    b, w = matmul_reshape_bias(rng)
    graph = b.returns("y")
    _, groups = optimize(graph)
    assert [g.name for g in groups if not g.is_view] == ["matmul_add_add_relu"]
    module = GraphModule(graph)
    assert [s.kind for s in module.plan.steps] == ["matmul_add_add_relu"]
    assert len(module.plan.views) == 2  # the result, and the residual read as (6, 12)
    x = rng.standard_normal((6, 8)).astype("float32")
    skip = rng.standard_normal((2, 3, 12)).astype("float32")
    expected = np.maximum((x @ w["w"]).reshape(2, 3, 12) + w["bias"] + skip, 0)
    np.testing.assert_allclose(module.run(x=x, skip=skip)["y"], expected, rtol=1e-5, atol=1e-5)


def test_reshapes_of_reshapes_merge_and_one_to_the_same_shape_goes() -> None:
    b = GraphBuilder()
    b.input("x", (4, 6))
    b.node("relu", "x", out="a")
    b.node("reshape", "a", out="r1", shape=(2, 12))
    b.node("reshape", "r1", out="r2", shape=(24,))
    b.node("reshape", "r2", out="r3", shape=(24,))
    b.node("negative", "r3", out="y")
    sunk = sink_reshapes(b.returns("y"))
    assert [n.op for n in sunk.nodes] == ["relu", "negative", "reshape"]
    x = np.arange(24, dtype="float32").reshape(4, 6) - 10
    np.testing.assert_array_equal(run(sunk, x=x), -np.maximum(x, 0).reshape(24))


@pytest.mark.parametrize(
    "operand_shape",
    [(2, 1, 12), (3, 1)],  # the reshape changes the dimensions these broadcast over
)
def test_a_reshape_stays_where_an_operand_would_not_fit(operand_shape, rng) -> None:
    b = GraphBuilder()
    b.input("x", (6, 12))
    b.constant("c", rng.standard_normal(operand_shape))
    b.node("relu", "x", out="a")
    b.node("reshape", "a", out="r", shape=(2, 3, 12))
    b.node("multiply", "r", "c", out="y")
    graph = b.returns("y")
    assert [n.op for n in sink_reshapes(graph).nodes] == ["relu", "reshape", "multiply"]
    x = rng.standard_normal((6, 12)).astype("float32")
    expected = np.maximum(x, 0).reshape(2, 3, 12) * graph.constants["c"]
    np.testing.assert_allclose(run(graph, x=x), expected, rtol=1e-6)


def test_a_reshape_read_twice_stays() -> None:
    b = GraphBuilder()
    b.input("x", (6, 4))
    b.node("relu", "x", out="a")
    b.node("reshape", "a", out="r", shape=(24,))
    b.node("negative", "r", out="n")
    b.node("add", "r", "n", out="y")
    assert [n.op for n in sink_reshapes(b.returns("y")).nodes] == [
        "relu",
        "reshape",
        "negative",
        "add",
    ]


def test_a_transformer_layer_runs_no_reshape_kernel_and_exports_its_views(rng, tmp_path) -> None:
    model = transformer_layer(rng)
    module = GraphModule(import_onnx(model))
    kinds = [step.kind for step in module.plan.steps]
    assert "reshape" not in kinds and len(module.plan.views) >= 10
    assert kinds.count("matmul_add") == 4  # every projection with its bias, one kernel
    inputs = {
        name: rng.standard_normal(kind.shape).astype(kind.dtype)
        for name, kind in module.plan.inputs.items()
    }
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    (expected,) = session.run(None, inputs)
    (ours,) = module.run(**inputs).values()
    np.testing.assert_allclose(ours, expected, rtol=1e-4, atol=1e-4)
    module.export(tmp_path / "model")
    loaded = GraphModule.load(tmp_path / "model")
    assert loaded.plan == module.plan
    np.testing.assert_array_equal(next(iter(loaded.run(**inputs).values())), ours)
