"""The proof that a loop's iterations touch disjoint memory (``loop_independence``),
which makes a loop ``llvm.loop.parallel_accesses``: whatever it proves holds when
every iteration's accesses are enumerated, it proves the register-tile loops that
made LLVM slow, and the code it annotates computes what numpy computes."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import compiler
from compiler import te
from compiler.codegen.loop_independence import disjoint_stride
from compiler.ir import expr as E
from compiler.ir.buffer import Buffer
from compiler.ir.expr import PrimExpr, Var
from compiler.ir.stmt import BufferStore, For, ForKind, SeqStmt, Stmt

Access = tuple[bool, dict[str, int], int]  # (a store?, coefficient by loop name, constant)


def affine(coefficients: dict[str, int], constant: int, loops: dict[str, Var]) -> PrimExpr:
    index: PrimExpr = E.const(constant, "int64")
    for name, coeff in coefficients.items():
        index = index + loops[name] * E.const(coeff, "int64")
    return index


def loop_nest(extent: int, inner: list[int], accesses: list[Access]) -> For:
    """``for v in range(extent)`` around loops of ``inner`` extents, nested, whose body
    makes ``accesses`` to one buffer: a store writes a load of the same buffer."""
    loops = {"v": Var("v", "int64")}
    loops.update({f"u{k}": Var(f"u{k}", "int64") for k in range(len(inner))})
    buffer = Buffer("b", (4096,))
    statements: list[Stmt] = []
    loaded: list[PrimExpr] = []
    for store, coefficients, constant in accesses:
        index = affine(coefficients, constant, loops)
        if store:
            value = sum(loaded, E.const(1.0, "float32")) if loaded else E.const(1.0, "float32")
            statements.append(BufferStore(buffer, value, (index,)))
        else:
            loaded.append(E.BufferLoad(buffer, (index,)))
    body: Stmt = SeqStmt(tuple(statements))
    for k in reversed(range(len(inner))):
        body = For(
            loops[f"u{k}"], E.const(0, "int64"), E.const(inner[k], "int64"), ForKind.SERIAL, body
        )
    return For(loops["v"], E.const(0, "int64"), E.const(extent, "int64"), ForKind.SERIAL, body)


def truly_disjoint(extent: int, inner: list[int], accesses: list[Access]) -> bool:
    """Enumerated: no element one iteration writes is touched by another. A load in
    this nest is made before every store (its value feeds them), so reads count too."""
    touched: list[tuple[set[int], set[int]]] = []
    for v in range(extent):
        reads, writes = set(), set()
        for values in itertools.product(*(range(n) for n in inner)):
            at = {"v": v, **{f"u{k}": x for k, x in enumerate(values)}}
            for store, coefficients, constant in accesses:
                element = constant + sum(c * at[name] for name, c in coefficients.items())
                (writes if store else reads).add(element)
        touched.append((reads, writes))
    return all(
        not (w1 & (r2 | w2)) and not (w2 & r1)
        for (r1, w1), (r2, w2) in itertools.combinations(touched, 2)
    )


@st.composite
def nests(draw: st.DrawFn) -> tuple[int, list[int], list[Access]]:
    inner = draw(st.lists(st.integers(1, 4), max_size=2))
    names = ["v"] + [f"u{k}" for k in range(len(inner))]
    coefficient = st.sampled_from([0, 1, 2, 3, 4, 8, 16, -1, -4, 17, 32, 64])

    def access(store: bool) -> Access:
        return (store, {n: draw(coefficient) for n in names}, draw(st.integers(0, 40)))

    accesses = [access(False) for _ in range(draw(st.integers(0, 2)))]
    accesses += [access(True) for _ in range(draw(st.integers(1, 2)))]
    return draw(st.integers(1, 5)), inner, accesses


@settings(max_examples=400, deadline=None)
@given(nests())
def test_what_it_proves_holds_for_every_pair_of_iterations(
    nest: tuple[int, list[int], list[Access]],
) -> None:
    extent, inner, accesses = nest
    loop = loop_nest(extent, inner, accesses)
    if disjoint_stride(loop, lambda buffer: id(buffer)) is not None:
        assert truly_disjoint(extent, inner, accesses), nest


def test_it_proves_an_accumulator_tile_and_refuses_a_shared_one() -> None:
    """``acc[y3*1792 + x2*16 + oi]`` read and written under x2 (the loop whose 2,700
    accesses LLVM compared pair by pair): each x2 owns 16 elements of each 1792-row.
    The same accumulator without x2 in its index is shared by every iteration."""
    tile = [
        (False, {"u0": 1792, "v": 16, "u1": 1}, 0),
        (True, {"u0": 1792, "v": 16, "u1": 1}, 0),
    ]
    assert disjoint_stride(loop_nest(56, [2, 16], tile), lambda buffer: id(buffer)) is not None
    shared = [(False, {"u1": 1}, 0), (True, {"u1": 1}, 0)]
    assert disjoint_stride(loop_nest(56, [2, 16], shared), lambda buffer: id(buffer)) is None
    overlapping = [(False, {"v": 16, "u1": 1}, 0), (True, {"v": 16, "u1": 1}, 8)]
    assert disjoint_stride(loop_nest(56, [2, 16], overlapping), lambda buffer: id(buffer)) is None


@pytest.mark.parametrize(
    ("tile", "annotated"),
    [(None, True), (16, False)],
    ids=["one-element-steps-annotated", "tile-steps-not-annotated"],
)
def test_a_matmul_accumulating_in_memory_computes_what_numpy_computes(
    tmp_path, tile: int | None, annotated: bool
) -> None:
    """A matmul whose accumulator stays in memory, its column loop innermost: a loop
    whose iterations step one element carries the annotation in the LLVM IR; under an
    unrolled tile, whose iterations step a tile apart, it does not (LLVM's vectorizer
    reordered such a loop's accesses to one element). Either way the result is numpy's."""
    m, n, k = 24, 48, 32
    a = te.placeholder((m, k), name="A")
    b = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), name="r")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    sch = compiler.Schedule(te.create_prim_func([a, b, c]))
    i, j, kk = sch.get_loops(sch.get_block("C"))
    if tile is None:
        sch.reorder(i, kk, j)
    else:
        j0, j1 = sch.split(j, [None, tile])
        sch.reorder(i, kk, j0, j1)
        sch.unroll(j1)
    module = compiler.build(sch.mod, target="llvm", default_schedule=False, dump_ir=tmp_path)
    (emitted,) = tmp_path.glob("*-llvm.ll")
    assert ("llvm.loop.parallel_accesses" in emitted.read_text()) is annotated
    rng = np.random.default_rng(3)
    x = rng.standard_normal((m, k), dtype=np.float32)
    y = rng.standard_normal((k, n), dtype=np.float32)
    out = np.zeros((m, n), dtype=np.float32)
    module[module.entry_name](x, y, out)
    np.testing.assert_allclose(out, x @ y, rtol=1e-4, atol=1e-4)
