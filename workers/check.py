"""What a candidate's outputs must be: seeded random inputs and the reference outputs
for them, and the comparison that decides ``wrong_result``.

The reference comes from numpy when the workload came from an operator spec that
has an entry in ``compiler.topi.reference.NUMPY_REFERENCES`` (computed in float64,
so it is the exact answer up to the inputs' rounding), else from the workload's
unscheduled build (its loops exactly as written, one thread). Inputs are random and never zero:
values in +-[0.5, 1.5], or [0.5, 1.5] for ops that need a positive domain, so a
candidate that skips a term, drops a sign or reads a neighbour cannot pass by
luck. Every parameter, outputs included, starts from the same seeded values, so a
candidate that leaves part of an output unwritten is caught too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from compiler.abi.signature import FuncSignature, ParamSpec
from compiler.ir.function import PrimFunc
from compiler.ir.layout_free import layout_free_positions
from compiler.runtime.prepacked import pack_arguments
from compiler.topi.reference import NUMPY_REFERENCES
from workers.base import WorkersError

# Largest accepted error relative to the largest reference value, by dtype: float32
# sums over thousands of terms in another order differ by about 1e-6 of the scale.
TOLERANCES = {"float16": 1e-2, "float32": 1e-4, "float64": 1e-10}

Arrays = Sequence[np.ndarray]


@dataclass(frozen=True)
class Reference:
    """A workload's arguments before the call and its expected written parameters;
    ``weights``: the positions of the parameters the workload marks constant (a model's
    weights, ``compiler.ir.layout_free``)."""

    signature: FuncSignature
    arguments: tuple[np.ndarray, ...]
    expected: Mapping[int, np.ndarray]
    source: str
    weights: tuple[int, ...] = ()

    def fresh_arguments(self) -> list[np.ndarray]:
        """Copies of the arguments, so no candidate sees another's writes."""
        return [a.copy() for a in self.arguments]

    def mismatch(self, arrays: Arrays, tolerance: float | None) -> str | None:
        """Why ``arrays`` (after the candidate ran) are wrong, or None when they match."""
        for index, expected in self._outputs.items():
            spec = self.signature.params[index]
            problem = _compare(arrays[index], expected, spec, tolerance)
            if problem is not None:
                return f"output {spec.name!r}: {problem} (reference: {self.source})"
        return None

    @cached_property
    def _outputs(self) -> dict[int, _Expected]:
        return {index: _Expected.of(values) for index, values in self.expected.items()}


@dataclass(frozen=True)
class _Expected:
    """An expected output and what every comparison with it needs, found once per
    workload: each candidate's check then costs three passes over its output, not a
    dozen (17-34 ms of a GEMM 1024^3 candidate's measurement before)."""

    values: np.ndarray
    special: np.ndarray | None  # where the values are not finite; None when all are
    scale: float  # the largest finite magnitude (at least the smallest positive float)

    @staticmethod
    def of(values: np.ndarray) -> _Expected:
        if not np.issubdtype(values.dtype, np.floating):
            return _Expected(values, None, 0.0)
        finite = np.isfinite(values)
        special = None if finite.all() else ~finite
        largest = float(np.abs(values[finite]).max()) if finite.any() else 0.0
        return _Expected(values, special, max(largest, np.finfo(np.float64).tiny))


class NoReferenceError(WorkersError):
    """The reference for a workload could not be computed; the message says why."""


def make_reference(func: PrimFunc, spec: Mapping[str, Any] | None, seed: int) -> Reference:
    """Random arguments for ``func`` and its reference outputs: numpy's when ``spec``
    (already checked to describe ``func``) names an op that has one, else the
    unscheduled build's."""
    from compiler.build import build_llvm

    signature = FuncSignature.from_prim_func("main", "main", func)
    if signature.size_vars:
        raise NoReferenceError(
            f"the workload has symbolic sizes {list(signature.size_vars)}; a runner needs "
            "concrete shapes to make inputs, so measure a workload with fixed sizes"
        )
    numpy_ref = NUMPY_REFERENCES.get(spec["op"]) if spec is not None else None
    positive = numpy_ref is not None and numpy_ref.positive
    rng = np.random.default_rng(seed)
    arguments = tuple(_random_array(p, rng, positive) for p in signature.params)
    written = [k for k, p in enumerate(signature.params) if p.written]
    if numpy_ref is not None and spec is not None:
        inputs = [a.astype(np.float64) for k, a in enumerate(arguments) if k not in written]
        outputs = numpy_ref.compute(*inputs, **spec["args"])
        if len(outputs) != len(written):
            raise NoReferenceError(
                f"numpy reference for {spec['op']} gave {len(outputs)} outputs, the workload "
                f"writes {len(written)}"
            )
        expected = {k: np.asarray(out) for k, out in zip(written, outputs, strict=True)}
        return Reference(
            signature, arguments, expected, f"numpy {spec['op']}", layout_free_positions(func)
        )
    module = build_llvm(func, default_schedule=False)
    # A workload may convert a constant weight itself (Winograd's kernel transform):
    # the build split that conversion out, so it runs first.
    arrays = pack_arguments(module, module.entry_name, [a.copy() for a in arguments])
    module[module.entry_name](*arrays)
    expected = {k: arrays[k] for k in written}
    return Reference(
        signature, arguments, expected, "the unscheduled build", layout_free_positions(func)
    )


def _random_array(param: ParamSpec, rng: np.random.Generator, positive: bool) -> np.ndarray:
    shape = tuple(int(d) for d in param.shape)
    dtype = param.np_dtype
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        low = 1 if positive or np.issubdtype(dtype, np.unsignedinteger) else -8
        values = rng.integers(low, 9, shape)
        return np.where(values == 0, 1, values).astype(dtype)
    magnitude = rng.uniform(0.5, 1.5, shape)
    if not positive:
        magnitude *= rng.choice(np.array([-1.0, 1.0]), shape)
    return magnitude.astype(dtype)


def _compare(
    got: np.ndarray, expected: _Expected, spec: ParamSpec, tol: float | None
) -> str | None:
    want = expected.values
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    if not np.issubdtype(spec.np_dtype, np.floating):
        wrong = np.argwhere(got != want)
        if len(wrong):
            at = tuple(int(i) for i in wrong[0])
            return f"{len(wrong)} elements differ; at {at}: got {got[at]}, expected {want[at]}"
        return None
    with np.errstate(invalid="ignore"):  # inf - inf where both are infinite: NaN, dropped below
        error = np.subtract(got, want, dtype=np.float64)
    np.abs(error, out=error)
    special = expected.special
    if special is not None:
        differs = special & ~((got == want) | (np.isnan(got) & np.isnan(want)))
        if differs.any():
            at = tuple(int(i) for i in np.argwhere(differs)[0])
            return f"at {at}: got {got[at]}, expected {want[at]}"
        if special.all():
            return None
        error[special] = 0.0
    worst = np.unravel_index(int(np.argmax(error)), error.shape)  # a NaN comes first
    relative = float(error[worst]) / expected.scale
    tolerance = TOLERANCES.get(spec.dtype, 1e-4) if tol is None else tol
    if relative <= tolerance:  # False for a NaN
        return None
    at = tuple(int(i) for i in worst)
    return (
        f"largest error {relative:.3g} of the largest reference value {expected.scale:.3g}, "
        f"over the tolerance {tolerance:g}; at {at}: got {got[at]}, expected {want[at]}"
    )
