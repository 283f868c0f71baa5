"""float32 ``exp`` and ``erf`` as plain LLVM instructions, so loops that call them
vectorize.

``llvm.exp.f32`` becomes a call of libm's ``expf`` per element, even inside a loop
LLVM vectorizes, and softmax spends most of its time there. Written out instead:

    exp(x) = 2**n * p(r),   n = round(x / ln 2),   r = x - n * ln 2,   |r| <= ln 2 / 2

with ``n * ln 2`` subtracted in two steps (a short constant whose product with ``n``
is exact, then the rest), a degree-7 polynomial ``p = 1 + r + r**2 * q(r)`` with
Cephes' ``expf`` coefficients, and ``2**n`` built in the exponent bits. Every
instruction (fmul, fadd, fptosi, shl, bitcast, select) has a vector form, so the
loop vectorizer handles it like any arithmetic.

Edges match numpy's float32 ``exp``: x is clamped to [-104, 89] only to keep ``n``
small, and ``2**n`` is applied as two halves, so a result past the float range
still overflows to inf, and one below the normal range rounds gradually through
the denormals to 0, in the final multiply, as a correctly rounded exp would. NaN
is passed through. The error is about 1 ulp: at most 8.4e-8 relative over 10**7
points of [-87, 88], where numpy's own float32 exp reaches 2.0e-7.

``erf`` has no LLVM intrinsic at all: every element was a call of libm's ``erff``,
and a BERT layer's GELU spent 1.4 ms there. Written out instead, as the rational
function ``erf(x) = x * P(x**2) / Q(x**2)`` on x clamped to [-4, 4] (degrees 6 and
4 in x**2, the coefficients of Eigen's fast float erf), which stays within 4.5e-7 of
the exact erf everywhere (7 ulp at most, near |x| = 3.2), is odd, is exactly 0 at 0
and +-1 from |x| = 4 on. NaN is passed through.
"""

from __future__ import annotations

from collections.abc import Callable

from compiler.codegen.llvm_types import float_literal

# Past these x the result is inf or 0 anyway; inside them 2**n's halves are normal.
_CLAMP_HIGH = 89.0
_CLAMP_LOW = -104.0
_LOG2_E = 1.4426950408889634
# 1.5 * 2**23: adding it rounds a float32 below 2**22 in size to an integer.
_ROUNDING_SHIFT = 12582912.0
# ln 2 split: 0.693359375 has 9 significant bits, so n * _LN2_HIGH is exact for |n| < 2**15.
_LN2_HIGH = 0.693359375
_LN2_LOW = -2.12194440e-4
# q(r), highest power first; p(r) = 1 + r + r**2 * q(r).
_POLYNOMIAL = (
    1.9875691500e-4,
    1.3981999507e-3,
    8.3334519073e-3,
    4.1665795894e-2,
    1.6666665459e-1,
    5.0000001201e-1,
)
# erf's numerator P and denominator Q, in x**2, highest power first.
_ERF_NUMERATOR = (
    -2.72614225801306e-10,
    2.77068142495902e-08,
    -2.10102402082508e-06,
    -5.69250639462346e-05,
    -7.34990630326855e-04,
    -2.95459980854025e-03,
    -1.60960333262415e-02,
)
_ERF_DENOMINATOR = (
    -1.45660718464996e-05,
    -2.13374055278905e-04,
    -1.68282697438203e-03,
    -7.37332916720468e-03,
    -1.42647390514189e-02,
)
# Past it erf is +-1 to float32's precision (and P/Q too).
_ERF_CLAMP = 4.0
_EXPONENT_BIAS = 127
_MANTISSA_BITS = 23

Assign = Callable[[str, str], str]


class _Float32:
    """float arithmetic written through ``assign``, one instruction per call."""

    def __init__(self, assign: Assign, flags: str) -> None:
        self.assign = assign
        self.flags = flags

    def arith(self, op: str, a: str, b: str | float, hint: str) -> str:
        return self.assign(f"{op} {self.flags} float {a}, {_operand(b)}", hint)

    def select(self, predicate: str, a: str, b: str | float, hint: str) -> str:
        """``a`` where ``fcmp predicate a, b`` holds, else ``b``."""
        operand = _operand(b)
        holds = self.assign(f"fcmp {predicate} float {a}, {operand}", f"{hint}_cmp")
        return self.assign(f"select i1 {holds}, float {a}, float {operand}", hint)


def emit_fast_expf(assign: Assign, x: str, flags: str) -> str:
    """Emit ``exp`` of the float ``x``; ``assign(instruction, hint)`` writes one
    instruction and returns its SSA name. ``flags`` are the fast-math flags of the
    arithmetic (``contract`` lets the polynomial use FMA)."""
    f = _Float32(assign, flags)
    clamped = _clamp(f, x)
    n_float = _nearest_integer(f, f.arith("fmul", clamped, _LOG2_E, "exp_t"))
    p = _polynomial(f, _reduce(f, clamped, n_float))
    n = assign(f"fptosi float {n_float} to i32", "exp_n")
    half = assign(f"ashr i32 {n}, 1", "exp_n")
    rest = assign(f"sub i32 {n}, {half}", "exp_n")
    scaled = f.arith("fmul", p, _power_of_two(assign, half), "exp")
    result = f.arith("fmul", scaled, _power_of_two(assign, rest), "exp")
    is_nan = assign(f"fcmp uno float {x}, 0.0", "exp_nan")
    return assign(f"select i1 {is_nan}, float {x}, float {result}", "exp")


def emit_fast_erff(assign: Assign, x: str, flags: str) -> str:
    """Emit ``erf`` of the float ``x`` (see the module's docstring); the arguments are
    those of ``emit_fast_expf``."""
    f = _Float32(assign, flags)
    capped = f.select("olt", x, _ERF_CLAMP, "erf_x")
    clamped = f.select("ogt", capped, -_ERF_CLAMP, "erf_x")
    square = f.arith("fmul", clamped, clamped, "erf_x2")
    numerator = _horner(f, _ERF_NUMERATOR, square, "erf_p")
    ratio = f.arith("fdiv", numerator, _horner(f, _ERF_DENOMINATOR, square, "erf_q"), "erf_r")
    result = f.arith("fmul", clamped, ratio, "erf")  # last, so a denormal x rounds once
    is_nan = assign(f"fcmp uno float {x}, 0.0", "erf_nan")
    return assign(f"select i1 {is_nan}, float {x}, float {result}", "erf")


def _horner(f: _Float32, coefficients: tuple[float, ...], x: str, hint: str) -> str:
    """The polynomial of ``coefficients`` (highest power first) at ``x``."""
    value = _literal(coefficients[0])
    for coefficient in coefficients[1:]:
        value = f.arith("fadd", f.arith("fmul", value, x, hint), coefficient, hint)
    return value


def _clamp(f: _Float32, x: str) -> str:
    """Compare-and-select, the form of x86's minps/maxps; NaN comes out as the bound
    and is put back at the end."""
    capped = f.select("olt", x, _CLAMP_HIGH, "exp_x")
    return f.select("ogt", capped, _CLAMP_LOW, "exp_x")


def _nearest_integer(f: _Float32, value: str) -> str:
    """Round to nearest by adding and removing 1.5 * 2**23, which needs no rounding
    instruction (SSE2 has none) and no libm call."""
    shifted = f.arith("fadd", value, _ROUNDING_SHIFT, "exp_n")
    return f.arith("fsub", shifted, _ROUNDING_SHIFT, "exp_n")


def _reduce(f: _Float32, x: str, n_float: str) -> str:
    partial = f.arith("fsub", x, f.arith("fmul", n_float, _LN2_HIGH, "exp_t"), "exp_r")
    return f.arith("fsub", partial, f.arith("fmul", n_float, _LN2_LOW, "exp_t"), "exp_r")


def _polynomial(f: _Float32, r: str) -> str:
    q = _literal(_POLYNOMIAL[0])
    for coefficient in _POLYNOMIAL[1:]:
        q = f.arith("fadd", f.arith("fmul", q, r, "exp_q"), coefficient, "exp_q")
    tail = f.arith("fmul", q, f.arith("fmul", r, r, "exp_r2"), "exp_p")
    return f.arith("fadd", f.arith("fadd", tail, r, "exp_p"), 1.0, "exp_p")


def _power_of_two(assign: Assign, n: str) -> str:
    """``2**n`` for n in the normal exponent range, by writing n + 127 into the
    exponent field."""
    biased = assign(f"add i32 {n}, {_EXPONENT_BIAS}", "exp_e")
    field = assign(f"shl i32 {biased}, {_MANTISSA_BITS}", "exp_e")
    return assign(f"bitcast i32 {field} to float", "exp_scale")


def _operand(value: str | float) -> str:
    """An SSA name as it is, a Python float as a float32 constant."""
    return _literal(value) if isinstance(value, float) else value


def _literal(value: float) -> str:
    return float_literal(value, "float32")
