"""The memory plan of a model's values: values that share memory never live at the
same time, on random plans and on a model run against numpy."""

from __future__ import annotations

import math

import numpy as np
from graph_builder import GraphBuilder
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.graph import GraphModule
from compiler.graph.ir import TensorType
from compiler.graph.memory_plan import ALIGNMENT, allocate, plan_storage
from compiler.graph.plan import Plan, Step, View


def chain_plan(sizes: list[int], *, keep: tuple[int, ...] = ()) -> Plan:
    """x -> v0 -> v1 -> ...; step k reads v(k-1) and every value in ``keep`` made before
    it; the last value is the output."""
    types = {"x": TensorType((4,), "float32")}
    steps = []
    previous = "x"
    for k, size in enumerate(sizes):
        types[f"v{k}"] = TensorType((size,), "float32")
        reads = (previous, *(f"v{j}" for j in keep if j < k - 1))
        steps.append(Step(f"f{k}", "key", reads, f"v{k}"))
        previous = f"v{k}"
    return Plan({"x": types["x"]}, (previous,), types, tuple(steps))


@st.composite
def random_plans(draw: st.DrawFn) -> Plan:
    dtypes = st.sampled_from(["float32", "int64", "bool", "float64"])
    types = {"x": TensorType((draw(st.integers(1, 64)),), draw(dtypes))}
    readable = ["x"]
    steps, views = [], []
    for k in range(draw(st.integers(1, 12))):
        reads = draw(st.lists(st.sampled_from(readable), min_size=1, max_size=3))
        output = f"v{k}"
        types[output] = TensorType((draw(st.integers(1, 64)), 2), draw(dtypes))
        steps.append(Step(f"f{k}", "key", tuple(reads), output))
        readable.append(output)
        if draw(st.booleans()):
            view = f"r{k}"
            source = draw(st.sampled_from([output, *(v.output for v in views)]))
            types[view] = TensorType((math.prod(types[source].shape),), types[source].dtype)
            views.append(View(view, source))
            readable.append(view)
    outputs = tuple(draw(st.lists(st.sampled_from(readable[1:]), min_size=1, max_size=3)))
    return Plan({"x": types["x"]}, outputs, types, tuple(steps), tuple(views))


def lifetimes(plan: Plan) -> dict[str, tuple[int, float]]:
    """Each step output's (position made, position of its last read, views included;
    infinity for a model output), computed directly."""
    source = {v.output: v.source for v in plan.views}

    def root(value: str) -> str:
        while value in source:
            value = source[value]
        return value

    made = {step.output: k for k, step in enumerate(plan.steps)}
    last: dict[str, float] = dict(made)
    for k, step in enumerate(plan.steps):
        for value in map(root, step.inputs):
            if value in last:
                last[value] = max(last[value], k)
    for value in map(root, plan.outputs):
        if value in last:
            last[value] = math.inf
    return {value: (made[value], last[value]) for value in made}


@settings(max_examples=200, deadline=None)
@given(random_plans())
def test_values_that_share_a_block_never_live_at_once(plan: Plan) -> None:
    storage = plan_storage(plan)
    lives = lifetimes(plan)
    assert set(storage.blocks) == set(lives)
    for value, block in storage.blocks.items():
        kind = plan.types[value]
        assert storage.sizes[block] >= math.prod(kind.shape) * np.dtype(kind.dtype).itemsize
    for a, (made_a, last_a) in lives.items():
        for b, (made_b, last_b) in lives.items():
            if a < b and storage.blocks[a] == storage.blocks[b]:
                assert last_a < made_b or last_b < made_a, (a, b, storage)


def test_a_chain_of_steps_takes_turns_in_two_blocks() -> None:
    storage = plan_storage(chain_plan([256] * 6))
    assert storage.sizes == (1024, 1024)
    assert [storage.blocks[f"v{k}"] for k in range(6)] == [0, 1, 0, 1, 0, 1]


def test_a_value_read_later_keeps_its_block_until_then() -> None:
    storage = plan_storage(chain_plan([256] * 6, keep=(0,)))
    others = {storage.blocks[f"v{k}"] for k in range(1, 6)}
    assert storage.blocks["v0"] not in others
    assert len(storage.sizes) == 3


def test_a_larger_value_grows_a_free_block_instead_of_taking_a_new_one() -> None:
    storage = plan_storage(chain_plan([16, 16, 64, 8]))
    assert len(storage.sizes) == 2
    assert max(storage.sizes) == 256


def test_arrays_start_at_a_cache_line_and_have_their_values_shape() -> None:
    plan = chain_plan([3, 5, 7])
    arrays = allocate(plan, plan_storage(plan))
    for value, array in arrays.items():
        assert array.ctypes.data % ALIGNMENT == 0
        assert array.shape == plan.types[value].shape and array.dtype == np.float32


def test_a_model_whose_values_share_memory_computes_what_numpy_does(rng) -> None:
    """A residual that outlives four kernels, each a reduction that ends its group, so
    every value is a buffer of its own and some of them must share memory."""
    b = GraphBuilder()
    x = b.input("x", (8, 32))
    b.node("softmax", x, out="s0", axis=-1)
    previous = "s0"
    for k in range(1, 5):
        b.node("exp", previous, out=f"e{k}")
        b.node("softmax", f"e{k}", out=f"s{k}", axis=-1)
        previous = f"s{k}"
    b.node("add", previous, "s0", out="y")
    graph = b.returns("y")
    module = GraphModule(graph)
    storage = plan_storage(module.plan)
    assert len(storage.sizes) < len(module.plan.steps)
    x_value = rng.standard_normal((8, 32)).astype("float32")

    def softmax(v: np.ndarray) -> np.ndarray:
        e = np.exp(v - v.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    s0 = softmax(x_value)
    expected = s0
    for _ in range(4):
        expected = softmax(np.exp(expected))
    for _ in range(2):  # a second run reads nothing the first one left behind
        (y,) = module.run(x=x_value).values()
        np.testing.assert_allclose(y, expected + s0, rtol=1e-5, atol=1e-6)
