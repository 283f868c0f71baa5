"""numpy's BLAS on the kernels' OpenMP pool: same results, the pool really used, and a
forked child that gets a clear error instead of a hang."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import compiler
from compiler import te
from compiler.runtime import share_pool_with_blas, shared_blas_calls


@pytest.fixture(scope="module")
def parallel_add() -> compiler.runtime.Module:
    n = 4096
    a = te.placeholder((n,), name="A")
    b = te.placeholder((n,), name="B")
    c = te.compute((n,), lambda i: a[i] + b[i], name="C")
    sch = compiler.Schedule(te.create_prim_func([a, b, c]))
    (i,) = sch.get_loops(sch.get_block("C"))
    outer, _ = sch.split(i, factors=[None, 64])
    sch.parallel(outer)
    return compiler.build(sch.mod, target="llvm")


def _blas_can_share() -> bool:
    share_pool_with_blas(True)
    before = shared_blas_calls()
    a = np.random.default_rng(1).standard_normal((256, 256))
    _ = a @ a
    return shared_blas_calls() > before


def test_blas_on_the_shared_pool_computes_what_float64_reference_says(parallel_add) -> None:
    if not _blas_can_share():
        pytest.skip("numpy's BLAS has no thread callback (not OpenBLAS 0.3.27+)")
    rng = np.random.default_rng(7)
    for m, k, n in [(300, 200, 100), (512, 512, 512), (65, 1000, 33)]:
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        before = shared_blas_calls()
        got = a @ b
        x = rng.standard_normal(4096).astype("float32")
        y = rng.standard_normal(4096).astype("float32")
        out = np.empty_like(x)
        parallel_add(x, y, out)
        np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)
        np.testing.assert_array_equal(out, x + y)
        assert shared_blas_calls() > before


def test_turning_sharing_off_gives_blas_its_own_threads_back(parallel_add) -> None:
    if not _blas_can_share():
        pytest.skip("numpy's BLAS has no thread callback (not OpenBLAS 0.3.27+)")
    a = np.random.default_rng(2).standard_normal((256, 256))
    try:
        assert share_pool_with_blas(False) is False
        before = shared_blas_calls()
        np.testing.assert_allclose(a @ a, np.einsum("ij,jk->ik", a, a), rtol=1e-10)
        assert shared_blas_calls() == before
    finally:
        share_pool_with_blas(True)


def test_a_forked_child_runs_blas_and_refuses_kernels_clearly() -> None:
    script = textwrap.dedent(
        """
        import os, numpy as np, compiler
        from compiler import te
        from compiler.runtime import shared_blas_calls
        from compiler.runtime.blas_pool import ThreadPoolError
        n = 1024
        a = te.placeholder((n,), name="A")
        c = te.compute((n,), lambda i: a[i] * 2.0, name="C")
        sch = compiler.Schedule(te.create_prim_func([a, c]))
        (i,) = sch.get_loops(sch.get_block("C"))
        sch.parallel(sch.split(i, factors=[None, 64])[0])
        lib = compiler.build(sch.mod, target="llvm")
        m = np.random.default_rng(0).standard_normal((256, 256))
        m @ m
        shared = shared_blas_calls() > 0
        pid = os.fork()
        if pid == 0:
            code = 0
            if not np.allclose(m @ m, np.einsum("ij,jk->ik", m, m)):
                code = 3
            x = np.ones(n, dtype="float32")
            try:
                lib["main"](x, np.empty_like(x))
                code = code or (4 if shared else 0)
            except ThreadPoolError:
                code = code or (0 if shared else 5)
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "child 0", done.stdout + done.stderr
