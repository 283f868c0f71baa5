"""compact_buffers: Allocates move to the innermost loop around their accesses and
shrink to the region one iteration touches.

The inputs are written directly in the loop form lower_blocks produces; results
are checked with the interpreter (on the pass's output) and compiler.build (which
runs the pass itself) against numpy.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from ir_interpreter import random_args, run_func

import compiler
from compiler import te
from compiler.ir import expr as E
from compiler.ir.buffer import Buffer
from compiler.ir.expr import PrimExpr, Var, const
from compiler.ir.function import PrimFunc
from compiler.ir.node import children
from compiler.ir.stmt import Allocate, BufferStore, For, ForKind, IfThenElse, Stmt, seq
from compiler.lower.compact_buffers import compact_buffers
from compiler.lower.pipeline import PASSES, lower_func
from compiler.schedule.schedule import Schedule


def loops(*specs: tuple[Var, PrimExpr | int], body: Stmt, kind: ForKind = ForKind.SERIAL) -> For:
    stmt = body
    for var, extent in reversed(specs):
        stmt = For(var, const(0), E.convert(extent), kind, stmt)
    return stmt  # type: ignore[return-value]


def allocations(func: PrimFunc) -> list[tuple[Allocate, list[str]]]:
    """Each Allocate with the loop variables around it."""
    found: list[tuple[Allocate, list[str]]] = []

    def walk(node: Stmt, around: list[str]) -> None:
        if isinstance(node, Allocate):
            found.append((node, around))
        inner = [*around, node.loop_var.name] if isinstance(node, For) else around
        for child in _stmt_children(node):
            walk(child, inner)

    walk(func.body, [])
    return found


def _stmt_children(node: Stmt) -> list[Stmt]:
    return [c for c in children(node) if isinstance(c, Stmt)]


def shape_of(alloc: Allocate) -> list[int | str]:
    return [d.value if isinstance(d, E.IntImm) else str(d) for d in alloc.buffer.shape]


def check(
    func: PrimFunc, expected: Callable[..., np.ndarray], sizes: dict[str, int] | None = None
) -> PrimFunc:
    """Compact ``func``, run the result in the interpreter and ``func`` compiled; the
    last parameter must equal ``expected(*inputs)``. Returns the compacted function."""
    compacted = compact_buffers(func)
    args = random_args(func, seed=5, sizes=sizes)
    want = expected(*args[:-1])
    run_func(compacted, *args)
    np.testing.assert_allclose(args[-1], want, rtol=1e-5, atol=1e-5)
    args[-1][...] = np.nan
    compiler.build(func)["main"](*args)
    np.testing.assert_allclose(args[-1], want, rtol=1e-5, atol=1e-5)
    return compacted


def tiled_matmul(m: int, n: int, k: int, outer_kind: ForKind = ForKind.SERIAL) -> PrimFunc:
    """C = A @ B through a full-size accumulator that only one 4x4 tile uses at a
    time: what cache_write "local" under a tile loop lowers to."""
    a, b, c = Buffer("A", (m, k)), Buffer("B", (k, n)), Buffer("C", (m, n))
    acc = Buffer("acc", (m, n), scope="local")
    i0, j0, i1, j1, r = Var("i_0"), Var("j_0"), Var("i_1"), Var("j_1"), Var("k")
    row, col = i0 * 4 + i1, j0 * 4 + j1
    inside = (row < m) & (col < n)
    init = loops(
        (i1, 4), (j1, 4), body=IfThenElse(inside, BufferStore(acc, const(0.0), (row, col)))
    )
    update = loops(
        (r, k),
        (i1, 4),
        (j1, 4),
        body=IfThenElse(
            inside,
            BufferStore(
                acc,
                E.BufferLoad(acc, (row, col))
                + E.BufferLoad(a, (row, r)) * E.BufferLoad(b, (r, col)),
                (row, col),
            ),
        ),
    )
    write_back = loops(
        (i1, 4),
        (j1, 4),
        body=IfThenElse(inside, BufferStore(c, E.BufferLoad(acc, (row, col)), (row, col))),
    )
    tile = loops((j0, (n + 3) // 4), body=seq(init, update, write_back))
    body = For(i0, const(0), const((m + 3) // 4), outer_kind, tile)
    return PrimFunc((a, b, c), Allocate(acc, body), {"global_symbol": "main"})


def test_accumulator_moves_under_the_tile_loop_and_shrinks_to_the_tile() -> None:
    compacted = check(tiled_matmul(10, 7, 5), lambda a, b: a @ b)
    ((alloc, around),) = allocations(compacted)
    assert around == ["i_0", "j_0"]
    assert shape_of(alloc) == [4, 4]
    text = compacted.script()
    assert "acc[i_1, j_1] = acc[i_1, j_1] + A[i_0 * 4 + i_1, k]" in text


def test_allocation_inside_a_parallel_loop_is_per_thread() -> None:
    compacted = check(tiled_matmul(9, 13, 6, ForKind.PARALLEL), lambda a, b: a @ b)
    ((alloc, around),) = allocations(compacted)
    assert around == ["i_0", "j_0"]
    assert shape_of(alloc) == [4, 4]


def fused_tiled_matmul(m: int, n: int, k: int) -> PrimFunc:
    """``tiled_matmul`` with its two tile loops fused into one parallel loop, whose
    ``//`` and ``%`` give the tile's row and column: what a schedule that fuses the
    tile loops and runs them in parallel lowers to."""
    a, b, c = Buffer("A", (m, k)), Buffer("B", (k, n)), Buffer("C", (m, n))
    acc = Buffer("acc", (m, n), scope="local")
    fused, i1, j1, r = Var("fused"), Var("i_1"), Var("j_1"), Var("k")
    tiles_n = n // 4
    row, col = fused // tiles_n * 4 + i1, fused % tiles_n * 4 + j1
    init = loops((i1, 4), (j1, 4), body=BufferStore(acc, const(0.0), (row, col)))
    update = loops(
        (r, k),
        (i1, 4),
        (j1, 4),
        body=BufferStore(
            acc,
            E.BufferLoad(acc, (row, col)) + E.BufferLoad(a, (row, r)) * E.BufferLoad(b, (r, col)),
            (row, col),
        ),
    )
    write_back = loops(
        (i1, 4), (j1, 4), body=BufferStore(c, E.BufferLoad(acc, (row, col)), (row, col))
    )
    body = For(
        fused, const(0), const(m // 4 * tiles_n), ForKind.PARALLEL, seq(init, update, write_back)
    )
    return PrimFunc((a, b, c), Allocate(acc, body), {"global_symbol": "main"})


def test_an_accumulator_under_a_fused_loop_shrinks_to_the_tile() -> None:
    """The tile's offset (``fused % 3 * 4``) stays put in one iteration of the fused
    loop: bounding it over every value it takes would keep the buffer whole, which
    LLVM cannot hold in registers (a convolution ran at a fourteenth of its speed)."""
    compacted = check(fused_tiled_matmul(8, 12, 5), lambda a, b: a @ b)
    ((alloc, around),) = allocations(compacted)
    assert around == ["fused"]
    assert shape_of(alloc) == [4, 4]


def test_buffer_shared_by_two_loop_nests_stays_whole() -> None:
    n = 11
    a, c, tmp = Buffer("A", (n,)), Buffer("C", (n,)), Buffer("T", (n,))
    i, j = Var("i"), Var("j")
    produce = loops((i, n), body=BufferStore(tmp, E.BufferLoad(a, (i,)) * 2.0, (i,)))
    consume = loops((j, n), body=BufferStore(c, E.BufferLoad(tmp, (n - 1 - j,)) + 1.0, (j,)))
    func = PrimFunc((a, c), Allocate(tmp, seq(produce, consume)), {"global_symbol": "main"})
    compacted = check(func, lambda x: x[::-1] * 2 + 1)
    ((alloc, around),) = allocations(compacted)
    assert around == [] and shape_of(alloc) == [n]


def test_stencil_region_covers_the_halo() -> None:
    """T holds a 6-wide window per tile; the consumer reads T[x + 0..2]."""
    n = 10
    a, c = Buffer("A", (n + 2,)), Buffer("C", (n,))
    tmp = Buffer("T", (n + 2,))
    t0, ax, t1 = Var("t_0"), Var("ax"), Var("t_1")
    window = IfThenElse(
        t0 * 4 + ax < n + 2,
        BufferStore(tmp, E.BufferLoad(a, (t0 * 4 + ax,)) * 3.0, (t0 * 4 + ax,)),
    )
    total = E.BufferLoad(tmp, (t0 * 4 + t1,)) + E.BufferLoad(tmp, (t0 * 4 + t1 + 1,))
    total = total + E.BufferLoad(tmp, (t0 * 4 + t1 + 2,))
    consume = IfThenElse(t0 * 4 + t1 < n, BufferStore(c, total, (t0 * 4 + t1,)))
    body = loops((t0, 3), body=seq(loops((ax, 6), body=window), loops((t1, 4), body=consume)))
    func = PrimFunc((a, c), Allocate(tmp, body), {"global_symbol": "main"})
    compacted = check(func, lambda x: 3 * (x[:-2] + x[1:-1] + x[2:]))
    ((alloc, around),) = allocations(compacted)
    assert around == ["t_0"] and shape_of(alloc) == [6]


def test_symbolic_shape_that_stays_symbolic_is_not_moved() -> None:
    """T's rows shrink to 2 per iteration of i_0 but its columns stay m wide: moved,
    it would be allocated on the heap once per iteration, so it stays whole."""
    n, m = Var("n"), Var("m")
    a, c = Buffer("A", (n, m)), Buffer("C", (n, m))
    tmp = Buffer("T", (n, m))
    i0, i1, j = Var("i_0"), Var("i_1"), Var("j")
    row = i0 * 2 + i1
    produce = loops(
        (i1, 2),
        (j, m),
        body=IfThenElse(row < n, BufferStore(tmp, E.BufferLoad(a, (row, j)) + 1.0, (row, j))),
    )
    consume = loops(
        (i1, 2),
        (j, m),
        body=IfThenElse(row < n, BufferStore(c, E.BufferLoad(tmp, (row, j)) * 2.0, (row, j))),
    )
    body = loops((i0, (n + 1) // 2), body=seq(produce, consume))
    func = PrimFunc((a, c), Allocate(tmp, body), {"global_symbol": "main"})
    compacted = check(func, lambda x: (x + 1) * 2, sizes={"n": 5, "m": 3})
    ((alloc, around),) = allocations(compacted)
    assert around == [] and shape_of(alloc) == ["n", "m"]


def test_symbolic_shape_with_a_constant_tile_is_moved_and_shrunk() -> None:
    n = Var("n")
    a, c, tmp = Buffer("A", (n,)), Buffer("C", (n,)), Buffer("T", (n,))
    i0, i1, i2 = Var("i_0"), Var("i_1"), Var("i_2")
    produce = loops(
        (i1, 4),
        body=IfThenElse(
            i0 * 4 + i1 < n,
            BufferStore(tmp, E.BufferLoad(a, (i0 * 4 + i1,)) + 1.0, (i0 * 4 + i1,)),
        ),
    )
    consume = loops(
        (i2, 4),
        body=IfThenElse(
            i0 * 4 + i2 < n,
            BufferStore(c, E.BufferLoad(tmp, (i0 * 4 + i2,)) * 2.0, (i0 * 4 + i2,)),
        ),
    )
    body = loops((i0, (n + 3) // 4), body=seq(produce, consume))
    func = PrimFunc((a, c), Allocate(tmp, body), {"global_symbol": "main"})
    compacted = check(func, lambda x: (x + 1) * 2, sizes={"n": 10})
    ((alloc, around),) = allocations(compacted)
    assert around == ["i_0"] and shape_of(alloc) == [4]


def test_nested_allocations_are_each_compacted() -> None:
    n = 6
    a, c = Buffer("A", (n, n)), Buffer("C", (n, n))
    outer_tmp, inner_tmp = Buffer("U", (n, n)), Buffer("V", (n, n))
    i, j, j2 = Var("i"), Var("j"), Var("j2")
    body = loops(
        (i, n),
        body=seq(
            loops((j, n), body=BufferStore(outer_tmp, E.BufferLoad(a, (i, j)) + 1.0, (i, j))),
            Allocate(
                inner_tmp,
                seq(
                    loops(
                        (j2, n),
                        body=BufferStore(
                            inner_tmp, E.BufferLoad(outer_tmp, (i, j2)) * 2.0, (i, j2)
                        ),
                    ),
                    loops(
                        (j, n), body=BufferStore(c, E.BufferLoad(inner_tmp, (i, n - 1 - j)), (i, j))
                    ),
                ),
            ),
        ),
    )
    func = PrimFunc((a, c), Allocate(outer_tmp, body), {"global_symbol": "main"})
    compacted = check(func, lambda x: ((x + 1) * 2)[:, ::-1])
    shapes = {
        alloc.buffer.name: (shape_of(alloc), around) for alloc, around in allocations(compacted)
    }
    assert shapes == {"U": ([1, n], ["i"]), "V": ([1, n], ["i"])}


def test_compute_at_intermediate_becomes_a_tile_buffer_after_lowering() -> None:
    A = te.placeholder((9, 10), name="A")
    B = te.compute((9, 10), lambda i, j: A[i, j] + 1, name="B")
    C = te.compute((9, 10), lambda i, j: B[i, j] * 2, name="C")
    sch = Schedule(te.create_prim_func([A, C]))
    _i, j = sch.get_loops(sch.get_block("C"))
    j0, _j1 = sch.split(j, [None, 4])
    sch.compute_at(sch.get_block("B"), j0)
    passes = [p for p in PASSES if p.name in ("lower_blocks", "compact_buffers")]
    lowered = lower_func(sch.mod["main"], passes=passes)
    ((alloc, around),) = allocations(lowered)
    assert around == ["i", "j_0"] and shape_of(alloc) == [1, 4]
    args = random_args(lowered, seed=1)
    run_func(lowered, *args)
    np.testing.assert_allclose(args[1], (args[0] + 1) * 2, rtol=1e-6)


def test_pass_is_idempotent() -> None:
    once = compact_buffers(tiled_matmul(10, 7, 5))
    twice = compact_buffers(once)
    assert once.script() == twice.script()
