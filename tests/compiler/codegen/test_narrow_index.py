"""32-bit index math: which GPU kernels get it, what their PTX holds, and that the
narrowed emission computes what the 64-bit one does (run for real on this CPU, whose
code generator shares the expression emitter with the GPU's)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy_int_ops import NUMPY_INT_OPS

import compiler
from compiler import te
from compiler.codegen import llvm_module
from compiler.codegen.llvm_stmt import FunctionEmitter
from compiler.cuda_build import build_cuda_binary
from compiler.ir import expr as E
from compiler.ir.analysis import substitute
from compiler.ir.buffer import Buffer
from compiler.ir.expr import Var
from compiler.ir.function import IRModule, PrimFunc
from compiler.ir.stmt import Block, BlockRealize, BufferStore, For, ForKind, true_predicate
from compiler.lower.gpu_kernels import lower_gpu
from compiler.lower.narrow_index import index_bits
from compiler.schedule import Schedule
from compiler.target.cuda import CudaTarget

CUDA = "cuda -arch=sm_80"
CAPABILITIES = CudaTarget.parse(CUDA).capabilities
# 64-bit index arithmetic in PTX; a 32-bit index becomes a pointer's byte offset by
# mul.wide and add.s64, which this leaves out.
WIDE_ARITHMETIC = re.compile(r"\b(mul\.lo|mad\.lo|mul\.hi|shl|shr|sub|and|or|div|rem)\.[sub]64\b")


def _elementwise(shape: tuple[int, ...]) -> Schedule:
    """``B = A * 2`` with its loops fused and bound to blocks of 256 threads."""
    a = te.placeholder(shape, name="A")
    b = te.compute(shape, lambda *i: a[i] * 2.0, name="B")
    sch = Schedule(te.create_prim_func([a, b]))
    block = sch.get_block("B")
    fused = sch.fuse(*sch.get_loops(block))
    outer, inner = sch.split(fused, [None, 256])
    sch.bind(outer, "blockIdx.x")
    sch.bind(inner, "threadIdx.x")
    return sch


def _kernel_bits(sch: Schedule) -> list[int]:
    program = lower_gpu(sch.mod["main"], "main", CAPABILITIES)
    return [kernel.index_bits for kernel in program.kernels]


def test_a_kernel_whose_indices_fit_in_int32_computes_them_in_32_bits() -> None:
    sch = _elementwise((64, 96, 48))
    assert _kernel_bits(sch) == [32]
    ptx = build_cuda_binary(sch.mod, CUDA).ptx
    assert not WIDE_ARITHMETIC.search(ptx), ptx
    assert re.search(r"\b(mul\.lo|mad\.lo)\.s32\b", ptx)


def test_a_kernel_over_more_than_four_billion_elements_keeps_64_bits() -> None:
    """Built, never run: 4100 x 2^20 elements (16 GiB) need 64-bit offsets (up to
    2^32 of them, LLVM itself finds unsigned 32-bit math enough, as the launch's
    ranges tell it)."""
    shape = (4100, 1 << 20)
    a = te.placeholder(shape, name="A")
    b = te.compute(shape, lambda i, j: a[i, j] * 2.0, name="B")
    sch = Schedule(te.create_prim_func([a, b]))
    rows, columns = sch.get_loops(sch.get_block("B"))
    outer, inner = sch.split(columns, [None, 1024])
    sch.bind(rows, "blockIdx.x")
    sch.bind(outer, "blockIdx.y")
    sch.bind(inner, "threadIdx.x")
    assert _kernel_bits(sch) == [64]
    assert WIDE_ARITHMETIC.search(build_cuda_binary(sch.mod, CUDA).ptx)


def test_integers_the_analysis_cannot_bound_keep_64_bits() -> None:
    i = Var("i")
    table = Buffer("T", (E.const(16),), "int32")
    out = Buffer("Out", (E.const(16),), "float32")
    values = Buffer("V", (E.const(16),), "float32")
    gathered = E.BufferLoad(values, (E.FloorMod(E.BufferLoad(table, (i,)) * 7, E.const(16)),))
    loop = For(i, E.const(0), E.const(16), ForKind.SERIAL, BufferStore(out, gathered, (i,)))
    assert index_bits(loop) == 64  # an int32 loaded and multiplied may leave int32
    truncated = E.Cast("int32", E.BufferLoad(values, (i,)))
    indexed = BufferStore(out, E.FloatImm(1.0, "float32"), (E.FloorMod(truncated, E.const(16)),))
    assert index_bits(For(i, E.const(0), E.const(16), ForKind.SERIAL, indexed)) == 64
    short = Buffer("S", (E.const(16),), "int16")
    small = E.FloorMod(E.BufferLoad(short, (i,)) * 7, E.const(16))
    fine = For(i, E.const(0), E.const(16), ForKind.SERIAL, BufferStore(out, values[small], (i,)))
    assert index_bits(fine) == 32  # an int16 times 7 fits


def test_a_loop_whose_end_passes_int32_keeps_64_bits() -> None:
    i = Var("i")
    out = Buffer("Out", (E.const(1 << 30),), "float32")
    store = BufferStore(out, E.FloatImm(0.0, "float32"), (i - E.const(1 << 30),))
    start, extent = E.const(1 << 30), E.const(1 << 30)
    assert index_bits(For(i, start, extent, ForKind.SERIAL, store)) == 64


# ---- narrowed emission, run on the CPU ----------------------------------------------

_I = Var("i")
_SIZE = 64
_A = Buffer("A", (E.const(_SIZE),), "float32")


class _NarrowEmitter(FunctionEmitter):
    """The CPU's function emitter with the GPU kernels' 32-bit index math."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.index_type = "i32"


def _index_exprs() -> st.SearchStrategy:
    """Index expressions of the loop variable with floor divisions and remainders of
    negative intermediates (what tiled and fused loops' bindings look like)."""
    leaves = st.one_of(st.just(_I), st.integers(-40, 40).map(E.const))

    def extend(children: st.SearchStrategy) -> st.SearchStrategy:
        ops = st.sampled_from([E.Add, E.Sub, E.Mul, E.Min, E.Max])
        divisions = st.sampled_from([E.FloorDiv, E.FloorMod])
        divisor = st.sampled_from([-6, -1, 2, 3, 8]).map(E.const)
        return st.one_of(
            st.builds(lambda op, a, b: op(a, b), ops, children, children),
            st.builds(lambda op, a, b: op(a, b), divisions, children, divisor),
        )

    return st.recursive(leaves, extend, max_leaves=6)


def _evaluate(e: E.PrimExpr, i: np.ndarray) -> np.ndarray:
    if isinstance(e, E.IntImm):
        return np.full_like(i, e.value)
    if isinstance(e, Var):
        return i
    return NUMPY_INT_OPS[type(e)](_evaluate(e.a, i), _evaluate(e.b, i))


def _gather(index: E.PrimExpr) -> PrimFunc:
    """``Out[i] = A[index % 64]`` as written, loop and all, with ``i`` offset by
    ``Zero[0]`` (0 at run time), so LLVM cannot fold the indices into constants."""
    out = Buffer("Out", (E.const(_SIZE),), "float32")
    zero = Buffer("Zero", (E.const(1),), "int16")
    shifted = substitute(index, {_I: _I + E.Cast("int32", zero[E.const(0)])})
    wrapped = E.FloorMod(shifted, E.const(_SIZE))
    body = For(_I, E.const(0), E.const(_SIZE), ForKind.SERIAL, BufferStore(out, _A[wrapped], (_I,)))
    root = BlockRealize((), true_predicate(), Block("root", (), body))
    return PrimFunc((_A, zero, out), root, {"global_symbol": "main"})


@settings(max_examples=40, deadline=None)
@given(_index_exprs())
def test_narrowed_index_math_reads_what_numpy_reads(index: E.PrimExpr) -> None:
    func = _gather(index)
    values = np.random.default_rng(0).standard_normal(_SIZE).astype("float32")
    wanted = values[_evaluate(E.FloorMod(index, E.const(_SIZE)), np.arange(_SIZE))]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(llvm_module, "FunctionEmitter", _NarrowEmitter)
        lib = compiler.build(IRModule({"main": func}), default_schedule=False)
    got = np.zeros(_SIZE, "float32")
    lib(values, np.zeros(1, "int16"), got)
    np.testing.assert_array_equal(got, wanted, err_msg=str(index))
