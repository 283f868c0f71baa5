"""Structural equality and hashing: the same computation built twice is equal and
hashes the same, in this process and in another; any real change makes it unequal."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from ir_examples import RECIPES, build, mm_relu

from compiler import IRModule, te
from compiler.ir import expr as E
from compiler.ir.buffer import Buffer
from compiler.ir.function import PrimFunc
from compiler.ir.node import Node, transform_pre
from compiler.ir.stmt import BlockRealize, BufferStore, For, ForKind, SeqStmt
from compiler.ir.structural import structural_equal, structural_hash

ROOT = Path(__file__).resolve().parents[3]


def replace_first(func: PrimFunc, kind: type, change: Any) -> PrimFunc:
    """``func`` with ``change(node)`` in place of its first node of type ``kind``."""
    done = []

    def swap(n: Node) -> Node | None:
        if not done and isinstance(n, kind):
            done.append(n)
            return change(n)
        return None

    return dataclasses.replace(func, body=transform_pre(func.body, swap))


def assert_same(a: Any, b: Any) -> None:
    assert structural_equal(a, b)
    assert structural_equal(b, a)
    assert structural_hash(a) == structural_hash(b)


def assert_different(a: Any, b: Any) -> None:
    assert not structural_equal(a, b)
    assert not structural_equal(b, a)
    assert structural_hash(a) != structural_hash(b)


def test_the_same_te_built_twice_is_equal() -> None:
    assert_same(mm_relu(), mm_relu())


def test_names_of_buffers_and_loop_variables_do_not_matter() -> None:
    renamed = mm_relu(names=("X", "W", "C"), renamed_indices=True)
    assert_same(mm_relu(), renamed)


def test_symbolic_sizes_map_by_first_use() -> None:
    first, second = mm_relu(n=None), mm_relu(n=None)
    assert first.size_vars[0] is not second.size_vars[0]
    assert_same(first, second)
    assert_different(mm_relu(n=None), mm_relu(n=128))


def test_a_changed_constant_or_dtype_is_unequal() -> None:
    assert_different(mm_relu(), mm_relu(relu_floor=0.5))
    assert_different(mm_relu(), mm_relu(n=127))
    assert_different(mm_relu(), mm_relu(dtype="float64"))


def test_a_changed_loop_kind_is_unequal() -> None:
    func = mm_relu()
    parallel = replace_first(func, For, lambda f: dataclasses.replace(f, kind=ForKind.PARALLEL))
    assert_different(func, parallel)
    again = replace_first(mm_relu(), For, lambda f: dataclasses.replace(f, kind=ForKind.PARALLEL))
    assert_same(parallel, again)


def test_annotations_matter_but_not_their_order() -> None:
    func = mm_relu()

    def annotate(values: dict[str, Any]) -> PrimFunc:
        return replace_first(func, For, lambda f: dataclasses.replace(f, annotations=values))

    assert_different(func, annotate({"pragma_unroll": 4}))
    assert_different(annotate({"pragma_unroll": 4}), annotate({"pragma_unroll": 8}))
    assert_same(annotate({"a": 1, "b": [1, 2]}), annotate({"b": [1, 2], "a": 1}))
    assert_different(annotate({"a": 1}), annotate({"a": True}))
    assert_different(annotate({"a": 1}), annotate({"a": 1.0}))


def test_block_names_and_function_attrs_matter() -> None:
    func = mm_relu()

    def rename(realize: Node) -> BlockRealize | None:
        if not isinstance(realize, BlockRealize) or realize.block.name != "Y":
            return None
        return dataclasses.replace(realize, block=dataclasses.replace(realize.block, name="Z"))

    renamed = dataclasses.replace(func, body=transform_pre(func.body, rename))
    assert_different(func, renamed)
    assert_different(func, func.with_attr("global_symbol", "main"))


def test_variables_match_by_position_of_definition() -> None:
    def nest(swap: bool) -> For:
        i, j = E.Var("i"), E.Var("j")
        buf = Buffer("A", (E.const(4), E.const(4)))
        store = BufferStore(buf, E.const(1.0), (j, i) if swap else (i, j))
        inner = For(j, E.const(0), E.const(4), ForKind.SERIAL, store)
        return For(i, E.const(0), E.const(4), ForKind.SERIAL, inner)

    first, second = nest(False), nest(False)
    # The buffer is free in a bare loop nest: it must be the same object.
    assert not structural_equal(first, second)
    assert structural_equal(first, second, map_free_vars=True)
    assert not structural_equal(nest(False), nest(True), map_free_vars=True)


def test_free_variables_in_expressions() -> None:
    x, y = te.var("x"), te.var("y")
    assert_same(x * 2 + 1, x * 2 + 1)
    assert not structural_equal(x + 1, y + 1)
    assert structural_equal(x + 1, y + 1, map_free_vars=True)
    assert structural_hash(x + 1, map_free_vars=True) == structural_hash(y + 1, map_free_vars=True)
    # A free mapping is one to one: x + x is not x + y.
    assert not structural_equal(x + x, x + y, map_free_vars=True)
    assert_different(x + 1, x + 2)
    assert_different(x + 1, 1 + x)
    assert_different(E.const(1, "int32"), E.const(1, "int64"))
    assert_different(E.const(0.0), E.const(-0.0))


def test_buffers_and_modules() -> None:
    a = Buffer("A", (E.const(3), E.const(5)), "float32")
    assert_same(a, Buffer("other", (E.const(3), E.const(5)), "float32"))
    assert_different(a, Buffer("A", (E.const(3), E.const(5)), "float16"))
    assert_different(a, Buffer("A", (E.const(3), E.const(5)), "float32", scope="local"))
    mod = IRModule({"mm_relu": mm_relu(), "small": mm_relu(n=5)})
    assert_same(mod, IRModule({"small": mm_relu(n=5), "mm_relu": mm_relu()}))
    assert_different(mod, IRModule({"mm_relu": mm_relu(), "small": mm_relu(n=6)}))
    assert_different(mod, IRModule({"mm_relu": mm_relu(), "tiny": mm_relu(n=5)}))


def test_seq_order_matters() -> None:
    func = mm_relu()
    swapped = replace_first(func, SeqStmt, lambda s: SeqStmt(tuple(reversed(s.seq))))
    assert_different(func, swapped)


def test_hash_is_stable_across_processes() -> None:
    script = (
        "import sys; sys.path.insert(0, 'tests/support');"
        "from ir_examples import mm_relu;"
        "from compiler.ir.structural import structural_hash;"
        "print(structural_hash(mm_relu(n=None)))"
    )
    outputs = set()
    for seed in ("1", "2"):
        done = subprocess.run(
            [sys.executable, "-c", script],
            cwd=ROOT,
            env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            check=True,
        )
        outputs.add(int(done.stdout))
    assert outputs == {structural_hash(mm_relu(n=None))}


@settings(max_examples=150, deadline=None)
@given(RECIPES, RECIPES)
def test_random_expressions(first: tuple[Any, ...], second: tuple[Any, ...]) -> None:
    variables = [te.var(f"x{k}") for k in range(3)]
    fresh = [te.var(f"y{k}") for k in range(3)]
    a = build(first, variables)
    assert_same(a, build(first, variables))
    assert structural_equal(a, build(first, fresh), map_free_vars=True)
    assert structural_hash(a, map_free_vars=True) == structural_hash(
        build(first, fresh), map_free_vars=True
    )
    b = build(second, variables)
    if structural_equal(a, b):
        assert structural_hash(a) == structural_hash(b)
    if first == second:
        assert structural_equal(a, b)
