"""The runtime: building, calling with numpy arrays, argument checks, timing, export."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from worker_candidates import GROWN_LOOP_MS

import compiler
import compiler.target.llvm
from compiler import te
from compiler.abi.signature import RuntimeArgumentError
from compiler.ir.function import IRModule, PrimFunc
from compiler.runtime import Module, ProfileResult, UnrunnableKernelError
from compiler.schedule import Schedule
from compiler.target.llvm import LLVMTarget, host_lacks


def vector_add() -> PrimFunc:
    n = te.var("n")
    a = te.placeholder((n,), name="A")
    b = te.placeholder((n,), name="B")
    c = te.compute((n,), lambda i: a[i] + b[i], name="C")
    return te.create_prim_func([a, b, c])


def row_scale() -> PrimFunc:
    """Two symbolic sizes shared across parameters: out[n, m] = x[n, m] * s[n]."""
    n, m = te.var("n"), te.var("m")
    x = te.placeholder((n, m), name="X")
    s = te.placeholder((n,), name="S")
    out = te.compute((n, m), lambda i, j: x[i, j] * s[i], name="Out")
    return te.create_prim_func([x, s, out])


@pytest.fixture(scope="module")
def add_lib():
    return compiler.build(vector_add())


@pytest.mark.parametrize("n", [1, 7, 64, 1000, 4099])
def test_vector_add_with_symbolic_length(add_lib, rng, n):
    a, b = rng.standard_normal((2, n)).astype("float32")
    c = np.zeros(n, "float32")
    add_lib(a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_functions_by_name_and_entry(rng):
    mod = IRModule({"add": vector_add(), "scale": row_scale()})
    lib = compiler.build(mod)
    assert sorted(lib) == ["add", "scale"]
    with pytest.raises(KeyError, match="several functions"):
        lib(np.zeros(1, "float32"))
    x = rng.standard_normal((3, 5)).astype("float32")
    s = rng.standard_normal(3).astype("float32")
    out = np.zeros((3, 5), "float32")
    lib["scale"](x, s, out)
    np.testing.assert_allclose(out, x * s[:, None], rtol=1e-6)
    with pytest.raises(KeyError, match="'add', 'scale'"):
        lib["mul"]
    single = compiler.build(vector_add().with_attr("global_symbol", "vadd"))
    assert single.entry_name == "vadd"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (lambda a, s, o: (a, s), "takes 3 arguments"),
        (lambda a, s, o: (a.astype("float64"), s, o), "'X' must have dtype float32, got float64"),
        (lambda a, s, o: (a.ravel(), s, o), "must have 2 dimensions"),
        (lambda a, s, o: (a, s[:2].copy(), o), r"S.shape\[0\] must equal X.shape\[0\] = 3"),
        (lambda a, s, o: (a, s, o[:, :4].copy()), r"Out.shape\[1\] must equal X.shape\[1\] = 5"),
        (lambda a, s, o: (a.T, s, o), "C-contiguous"),
        (lambda a, s, o: (a, s, [[0.0] * 5] * 3), "must be a numpy array, got list"),
        (lambda a, s, o: (o, s, o), "share memory"),
    ],
    ids=["count", "dtype", "ndim", "shape", "shape2", "layout", "type", "alias"],
)
def test_wrong_arguments_raise_named_errors(rng, args, message):
    lib = compiler.build(row_scale())
    x = rng.standard_normal((3, 5)).astype("float32")
    s = rng.standard_normal(3).astype("float32")
    out = np.zeros((3, 5), "float32")
    with pytest.raises(RuntimeArgumentError, match=message):
        lib(*args(x, s, out))
    assert issubclass(RuntimeArgumentError, ValueError)


def test_constant_shape_mismatch_names_expected_shape():
    a = te.placeholder((4, 6), name="A")
    b = te.compute((4, 6), lambda i, j: a[i, j] * 2.0, name="B")
    lib = compiler.build(te.create_prim_func([a, b]))
    with pytest.raises(RuntimeArgumentError, match=r"'A' has shape \(4, 5\), expected \(4, 6\)"):
        lib(np.zeros((4, 5), "float32"), np.zeros((4, 6), "float32"))


def test_time_evaluator(add_lib, rng):
    a, b = rng.standard_normal((2, 256)).astype("float32")
    c = np.zeros(256, "float32")
    result = add_lib.time_evaluator("main", number=5, repeat=3)(a, b, c)
    assert isinstance(result, ProfileResult)
    assert len(result.results) == 3
    assert 0 < result.min <= result.median <= result.max
    assert result.mean > 0
    np.testing.assert_array_equal(c, a + b)
    grown = add_lib.time_evaluator("main", number=1, repeat=1, min_repeat_ms=GROWN_LOOP_MS)(a, b, c)
    assert grown.number > 1
    with pytest.raises(RuntimeArgumentError):
        add_lib.time_evaluator("main")(a, b)


AVX512 = "llvm -mcpu=skylake-avx512"


def _refuses_to_run(lib: Module, tmp_path: Path) -> None:
    """Calling, timing or taking the bare function raises UnrunnableKernelError naming
    the target and the fix, and runs nothing; the code can still be exported."""
    a, b = np.ones((2, 16), "float32")
    c = np.full(16, np.nan, "float32")
    with pytest.raises(UnrunnableKernelError, match=r"skylake-avx512.*\+avx512f.*build for 'llvm'"):
        lib(a, b, c)
    with pytest.raises(UnrunnableKernelError):
        lib.time_evaluator("main", number=1, repeat=1)(a, b, c)
    with pytest.raises(UnrunnableKernelError):
        lib["main"].raw  # noqa: B018 (the property raises)
    assert np.isnan(c).all()
    lib.export_library(str(tmp_path / "kernel.so"))


@pytest.mark.skipif(not host_lacks(LLVMTarget.parse(AVX512)), reason="this host runs AVX-512 code")
def test_a_kernel_built_for_instructions_this_host_lacks_refuses_to_run(tmp_path):
    _refuses_to_run(compiler.build(vector_add(), target=AVX512), tmp_path)


def test_a_host_without_the_targets_instructions_refuses_to_run_its_kernel(monkeypatch, tmp_path):
    """The same on any host: the build is told this host lacks AVX-512F, as an AVX2
    host does (where calling the kernel died of SIGILL, taking the test run with it)."""
    monkeypatch.setattr(compiler.target.llvm, "host_lacks", lambda target: ("+avx512f",))
    _refuses_to_run(compiler.build(vector_add(), target=AVX512), tmp_path)


def test_get_source(add_lib):
    assert "define void @tensortune_main" in add_lib.get_source("ll")
    assert "tensortune_main:" in add_lib.get_source("asm")
    with pytest.raises(ValueError, match="'ll' or 'asm'"):
        add_lib.get_source("ptx")


def test_export_library_round_trip(tmp_path, rng):
    mod = IRModule({"main": vector_add(), "scale": row_scale()})
    lib = compiler.build(mod)
    path = tmp_path / "kernels.so"
    lib.export_library(str(path))
    loaded = compiler.load_module(str(path))
    assert sorted(loaded) == ["main", "scale"]
    a, b = rng.standard_normal((2, 33)).astype("float32")
    c = np.zeros(33, "float32")
    loaded(a, b, c)
    np.testing.assert_array_equal(c, a + b)
    x = rng.standard_normal((4, 9)).astype("float32")
    s = rng.standard_normal(4).astype("float32")
    out = np.zeros((4, 9), "float32")
    loaded["scale"](x, s, out)
    np.testing.assert_allclose(out, x * s[:, None], rtol=1e-6)
    with pytest.raises(RuntimeArgumentError, match="must equal"):
        loaded["scale"](x, s[:3].copy(), out)
    assert loaded.time_evaluator("main", number=2)(a, b, c).mean > 0


def test_non_dividing_split_builds_and_computes(rng):
    a = te.placeholder((10,), name="A")
    r = te.reduce_axis((0, 10), name="r")
    total = te.compute((1,), lambda i: te.sum(a[r] * 2.0, axis=r), name="total")
    b = te.compute((10,), lambda i: a[i] + 1.0, name="B")
    sch = Schedule(te.create_prim_func([a, total, b]))
    (i,) = sch.get_loops(sch.get_block("B"))
    sch.split(i, [None, 4])
    _, reduce_loop = sch.get_loops(sch.get_block("total"))
    sch.split(reduce_loop, [None, 4])
    lib = compiler.build(sch.mod)
    x = rng.standard_normal(10).astype("float32")
    t = np.zeros(1, "float32")
    y = np.zeros(10, "float32")
    lib(x, t, y)
    np.testing.assert_allclose(t, [2 * x.sum()], rtol=1e-5)
    np.testing.assert_allclose(y, x + 1, rtol=1e-6)


def test_build_a_te_schedule_with_args(rng):
    a = te.placeholder((12, 8), name="A")
    b = te.compute((12, 8), lambda i, j: a[i, j] * 3.0, name="B")
    s = te.create_schedule(b.op)
    outer, _inner = s[b].split(b.op.axis[0], factor=5)
    s[b].parallel(outer)
    s[b].vectorize(b.op.axis[1])
    lib = compiler.build(s, [a, b], target="llvm")
    x = rng.standard_normal((12, 8)).astype("float32")
    y = np.zeros((12, 8), "float32")
    lib(x, y)
    np.testing.assert_allclose(y, 3 * x, rtol=1e-6)


def test_a_process_exits_cleanly_while_openmp_threads_spin() -> None:
    """Under OMP_WAIT_POLICY=active OpenMP's idle threads spin in libgomp until the
    process ends; LLVM unloading libgomp at exit used to crash every such process."""
    script = textwrap.dedent(
        """
        import numpy as np, compiler
        from compiler import te
        n = 4096
        a = te.placeholder((n,), name="A")
        c = te.compute((n,), lambda i: a[i] * 2.0, name="C")
        sch = compiler.Schedule(te.create_prim_func([a, c]))
        (i,) = sch.get_loops(sch.get_block("C"))
        sch.parallel(sch.split(i, factors=[None, 64])[0])
        kernel = compiler.build(sch.mod, target="llvm")["main"]
        x = np.random.default_rng(0).standard_normal(n).astype("float32")
        y = np.empty_like(x)
        kernel(x, y)
        assert np.array_equal(y, x * 2)
        print("ran")
        """
    )
    env = {**os.environ, "OMP_WAIT_POLICY": "active", "OMP_NUM_THREADS": "2"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env
    )
    assert (done.returncode, done.stdout.strip()) == (0, "ran"), done.stderr
