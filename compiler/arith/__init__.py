"""Integer arithmetic on index expressions: bounds and simplification.

The schedule primitives (compute_at) and lowering passes (compact_buffers,
simplify) ask the same two questions of index expressions: what range of values
does this take while some loops run, and what is its simplest form there. Every
expression rewrite rule of the compiler lives here, once.
"""

from compiler.arith.bounds import Interval, bound, const_bound
from compiler.arith.const_interval import const_interval, fits
from compiler.arith.exact_image import dense_image
from compiler.arith.linear import same_expr, structural_key
from compiler.arith.rewrite import normalize
from compiler.arith.simplifier import Simplifier, can_prove, simplify

__all__ = [
    "Interval",
    "Simplifier",
    "bound",
    "can_prove",
    "const_bound",
    "const_interval",
    "dense_image",
    "fits",
    "normalize",
    "same_expr",
    "simplify",
    "structural_key",
]
