"""``build(..., dump_ir=folder)``: every lowering pass, the LLVM IR and the assembly."""

from __future__ import annotations

import numpy as np

import compiler
from compiler import te
from compiler.lower.pipeline import PASS_NAMES


def test_dump_ir_writes_every_step_and_the_build_still_computes(tmp_path) -> None:
    a = te.placeholder((37, 19), name="A")
    c = te.compute((37, 19), lambda i, j: a[i, j] * 2.0 + 1.0, name="C")
    lib = compiler.build(te.create_prim_func([a, c]), dump_ir=tmp_path / "ir")
    names = sorted(p.name for p in (tmp_path / "ir").iterdir())
    steps = ["input", *PASS_NAMES]
    expected = [f"{k + 1:02d}-main-{step}.py" for k, step in enumerate(steps)]
    n = len(steps)
    expected += [
        f"{n + 1:02d}-llvm.ll",
        f"{n + 2:02d}-llvm-optimized.ll",
        f"{n + 3:02d}-assembly.s",
    ]
    assert names == expected
    flattened = (tmp_path / "ir" / expected[n - 1]).read_text()
    assert flattened != (tmp_path / "ir" / expected[0]).read_text()
    assert "define" in (tmp_path / "ir" / f"{n + 1:02d}-llvm.ll").read_text()
    x = np.random.default_rng(3).standard_normal((37, 19)).astype("float32")
    out = np.empty_like(x)
    lib(x, out)
    np.testing.assert_allclose(out, x * 2 + 1, rtol=1e-6)
