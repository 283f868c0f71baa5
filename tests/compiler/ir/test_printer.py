"""The TVMScript-like printer: allocations, reads without the accumulator, remapped
block variables, grids, scoped names, and tensor expressions."""

from __future__ import annotations

import dataclasses

from ir_examples import mm_relu

from compiler import IRModule, te
from compiler.ir import expr as E
from compiler.ir.node import Node, transform_pre
from compiler.ir.stmt import For, ForKind
from compiler.schedule import Schedule


def test_mm_relu_prints_like_tvmscript() -> None:
    text = mm_relu(n=128).script()
    expected = """\
@T.prim_func
def mm_relu(A: T.Buffer((128, 96), "float32"), B: T.Buffer((96, 80), "float32"), \
C: T.Buffer((128, 80), "float32")):
    # with T.block("root"):
    Y = T.alloc_buffer((128, 80), "float32")
    for i, j, k in T.grid(128, 80, 96):
        with T.block("Y"):
            v_i, v_j, v_k = T.axis.remap("SSR", [i, j, k])
            T.reads(A[v_i, v_k], B[v_k, v_j])
            T.writes(Y[v_i, v_j])
            with T.init():
                Y[v_i, v_j] = T.float32(0.0)
            Y[v_i, v_j] = Y[v_i, v_j] + A[v_i, v_k] * B[v_k, v_j]
    for x, y in T.grid(128, 80):
        with T.block("C"):
            v_x, v_y = T.axis.remap("SS", [x, y])
            T.reads(Y[v_x, v_y])
            T.writes(C[v_x, v_y])
            C[v_x, v_y] = T.max(Y[v_x, v_y], T.float32(0.0))"""
    assert text == expected


def test_sibling_nests_reuse_names_but_nested_ones_do_not() -> None:
    A = te.placeholder((4, 4), name="A")
    B = te.compute((4, 4), lambda i, j: A[i, j] + 1, name="B")
    C = te.compute((4, 4), lambda i, j: B[j, i] * 2, name="C")
    text = te.create_prim_func([A, C]).script()
    assert text.count("for i, j in T.grid(4, 4):") == 2
    assert "v_i_1" not in text

    outer = E.Var("i")
    inner = E.Var("i")
    nest = For(
        outer,
        E.const(0),
        E.const(2),
        ForKind.PARALLEL,
        For(inner, E.const(0), E.const(3), ForKind.SERIAL, te.create_prim_func([A, C]).body),
    )
    printed = str(nest)
    assert "for i in T.parallel(2):" in printed and "for i_1 in T.serial(3):" in printed


def test_scheduled_loops_and_predicates() -> None:
    func = mm_relu(n=None)
    sch = Schedule(func)
    _i, j, _k = sch.get_loops(sch.get_block("Y"))
    _, _j_inner = sch.split(j, [None, 7])
    text = sch.mod.script()
    assert "T.grid(n, 12, 7, 96)" in text
    assert "v_j = T.axis.spatial(80, j_0 * 7 + j_1)" in text
    assert "T.where(j_0 * 7 + j_1 < 80)" in text
    assert "v_i = T.axis.spatial(n, i)" in text


def test_loop_kinds_and_annotations_print() -> None:
    func = mm_relu()
    done: list[Node] = []

    def change(node: Node) -> Node | None:
        if isinstance(node, For) and not done:
            done.append(node)
            return dataclasses.replace(node, kind=ForKind.PARALLEL, annotations={"u": 1})
        return None

    text = dataclasses.replace(func, body=transform_pre(func.body, change)).script()
    assert "for i in T.parallel(128, annotations={'u': 1}):" in text
    assert "for j, k in T.grid(80, 96):" in text


def test_module_prints_every_function() -> None:
    text = IRModule({"mm_relu": mm_relu(), "small": mm_relu(n=3)}).script()
    assert text.startswith("@I.ir_module\nclass Module:\n")
    assert "    def mm_relu(" in text and "    def small(" in text


def test_tensor_expressions_print() -> None:
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n, n), name="B")
    i = te.var("i")
    k = te.reduce_axis((0, n), "k")
    assert str(A[i] + 1) == "A[i] + T.float32(1.0)"
    assert str(te.sum(B[i, k] * A[k], axis=k)) == "te.sum(B[i, k] * A[k], axis=[k])"
    text = str(te.max(B[i, k], axis=k, where=k > 2))
    assert text == "te.max(B[i, k], axis=[k], where=k > 2)"
    C = te.compute((n,), lambda i: te.sum(B[i, k] * A[k], axis=k), name="C")
    assert str(C.op.body) == "te.sum(B[i, k] * A[k], axis=[k])"
    assert repr(C) == "Tensor(name=C, shape=(n), dtype=float32)"
    assert repr(C.op) == "compute(C, [i, k]: te.sum(B[i, k] * A[k], axis=[k]))"
    assert repr(A.op) == "placeholder(A, shape=(n), dtype=float32)"
