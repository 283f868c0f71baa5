"""Layout operators that move no data: reshapes as views below the elementwise nodes
that read them, reshapes and transposes read in place by the kernel after them, the
groups they leave, and the models computing what numpy and onnxruntime do."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from graph_builder import GraphBuilder
from onnx_models import transformer_layer

import compiler
from compiler import te, topi
from compiler.graph import GraphModule, fuse, import_onnx, optimize
from compiler.graph.reshape_sinking import sink_reshapes
from compiler.schedule.primitives.dataflow import leaf_realizes
from compiler.te import TensorError


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


def test_the_epilogue_joins_the_matmul_and_the_reshapes_cost_no_kernel(rng) -> None:
    b, w = matmul_reshape_bias(rng)
    graph = b.returns("y")
    _, groups = optimize(graph)
    # the residual is read in place as (6, 12); the result is a view of (6, 12) as (2, 3, 12)
    assert [g.name for g in groups if not g.is_view] == ["reshape_matmul_add_add_relu"]
    module = GraphModule(graph)
    assert [s.kind for s in module.plan.steps] == ["reshape_matmul_add_add_relu"]
    assert len(module.plan.views) == 1
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


def test_a_reshape_read_twice_sinks_below_both_readers(rng) -> None:
    """GELU's shape: the reshaped value read twice. The reshape moves below both
    readers in turn and goes, so the relu, the negation and the product are one
    group, and the reshape a view of its result."""
    b = GraphBuilder()
    b.input("x", (6, 4))
    b.node("relu", "x", out="a")
    b.node("reshape", "a", out="r", shape=(24,))
    b.node("negative", "r", out="n")
    b.node("multiply", "r", "n", out="y")
    graph = sink_reshapes(b.returns("y"))
    assert [n.op for n in graph.nodes] == ["relu", "negative", "multiply", "reshape"]
    assert [group.name for group in fuse(graph)] == ["relu_negative_multiply", "reshape"]
    x = rng.standard_normal((6, 4)).astype("float32")
    expected = -(np.maximum(x, 0) ** 2).reshape(24)
    np.testing.assert_allclose(run(b.graph, x=x), expected, rtol=1e-6)


def test_a_transformer_layer_runs_no_reshape_or_transpose_kernel(rng, tmp_path) -> None:
    """Every reshape and transpose is a view or read in place by the kernel after it;
    the projections take their biases (and residuals) as epilogues, the first
    feed-forward one its GELU too."""
    model = transformer_layer(rng)
    module = GraphModule(import_onnx(model))
    kinds = [step.kind for step in module.plan.steps]
    assert not [kind for kind in kinds if kind in ("reshape", "transpose")]
    assert sum(kind.endswith("matmul_add") for kind in kinds) == 3
    assert sum(kind.endswith("matmul_add_divide_erf_add_multiply_multiply") for kind in kinds) == 1
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


def heads_attention(rng: np.random.Generator) -> GraphBuilder:
    """Scores of 2 heads: q and k (4, 6) split as (4, 2, 3), transposed to (2, 4, 3) and
    (2, 3, 4), multiplied, with k's transposed value also read by a relu."""
    b = GraphBuilder()
    b.input("q", (4, 6))
    b.input("k", (4, 6))
    b.node("reshape", "q", out="q_split", shape=(4, 2, 3))
    b.node("transpose", "q_split", out="q_heads", axes=(1, 0, 2))
    b.node("reshape", "k", out="k_split", shape=(4, 2, 3))
    b.node("transpose", "k_split", out="k_heads", axes=(1, 2, 0))
    b.node("matmul", "q_heads", "k_heads", out="scores")
    b.node("relu", "k_heads", out="k_relu")
    return b


def test_transposes_are_read_in_place_by_their_one_reader(rng) -> None:
    graph = heads_attention(rng).returns("scores", "k_relu")
    _, groups = optimize(graph)
    # q's reshape and transpose are the matmul's prologue; k's transpose has two
    # readers, so it stays a kernel, and k's reshape a view
    assert sorted(g.name for g in groups if not g.is_view) == [
        "relu",
        "reshape_transpose_matmul",
        "transpose",
    ]
    assert [g.name for g in groups if g.is_view] == ["reshape"]
    q = rng.standard_normal((4, 6)).astype("float32")
    k = rng.standard_normal((4, 6)).astype("float32")
    outputs = GraphModule(graph).run(q=q, k=k)
    q_heads = q.reshape(4, 2, 3).transpose(1, 0, 2)
    k_heads = k.reshape(4, 2, 3).transpose(1, 2, 0)
    np.testing.assert_allclose(outputs["scores"], q_heads @ k_heads, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(outputs["k_relu"], np.maximum(k_heads, 0))


def test_a_view_reads_its_source_in_place_and_is_never_an_argument() -> None:
    a = te.placeholder((3, 4), "float32", name="A")
    a_t = topi.transpose(a, (1, 0), view=True)
    doubled = te.compute((4, 3), lambda i, j: a_t[i, j] * 2.0, name="D")
    func = te.create_prim_func([a, doubled])
    assert len(leaf_realizes(func.body)) == 1  # no block copies the view
    module = compiler.build(func)
    x = np.arange(12, dtype="float32").reshape(3, 4)
    out = np.zeros((4, 3), "float32")
    module["main"](x, out)
    np.testing.assert_array_equal(out, 2 * x.T)
    with pytest.raises(TensorError, match="view of 'A'"):
        te.create_prim_func([a, a_t])


def test_reading_through_reshapes_and_transposes_indexes_without_division() -> None:
    """A head's slice of a (tokens, heads * dim) matrix, read through reshape and
    transpose views, is ``q[t, h * dim + d]``: the composed flat offsets' divisions
    and remainders resolve over the loops' ranges, so tiling sees unit strides. A
    read at ``r // 5, r % 5`` with ``r`` up to 10 cannot resolve and stays."""
    tokens, heads, dim = 8, 3, 4
    q = te.placeholder((tokens, heads * dim), "float32", name="Q")
    per_head = topi.transpose(
        topi.reshape(q, (tokens, heads, dim), view=True), (1, 0, 2), view=True
    )
    scaled = te.compute((heads, tokens, dim), lambda h, t, d: per_head[h, t, d] * 2.0, name="S")
    func = te.create_prim_func([q, scaled])
    text = func.script()
    assert "//" not in text and "%" not in text
    assert "Q[v_t, v_h * 4 + v_d]" in text
    module = compiler.build(func)
    x = np.random.default_rng(3).standard_normal((tokens, heads * dim)).astype("float32")
    out = np.zeros((heads, tokens, dim), "float32")
    module["main"](x, out)
    np.testing.assert_array_equal(out, 2 * x.reshape(tokens, heads, dim).transpose(1, 0, 2))

    c = te.placeholder((8, 5), "float32", name="C")
    blocked = topi.reshape(c, (2, 4, 5), view=True)
    moved = te.compute((2, 5, 4), lambda b, w, k: blocked[b, k, w], name="M")
    flat = te.compute((10, 4), lambda r, k: moved[r // 5, r % 5, k], name="F")
    assert "//" in te.create_prim_func([c, flat]).script()
