"""Integer arithmetic on index expressions: bounds and simplification.

The schedule primitives (compute_at) and lowering passes (compact_buffers) ask
the same two questions of index expressions: what range of values does this
take while some loops run, and what is the readable form of that range.
"""

from compiler.arith.bounds import Interval, bound, const_bound
from compiler.arith.dense import dense_image
from compiler.arith.linear import same_expr, structural_key
from compiler.arith.simplifier import can_prove, const_interval, normalize, simplify

__all__ = [
    "Interval",
    "bound",
    "can_prove",
    "const_bound",
    "const_interval",
    "dense_image",
    "normalize",
    "same_expr",
    "simplify",
    "structural_key",
]
