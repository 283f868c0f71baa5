"""The loop IR: expressions, statements, blocks, buffers, functions and modules."""

from compiler.ir import printer as _printer  # noqa: F401  (installs the nodes' text forms)
from compiler.ir.buffer import Buffer
from compiler.ir.expr import (
    BufferLoad,
    Call,
    Cast,
    FloatImm,
    IntImm,
    PrimExpr,
    Range,
    Select,
    Var,
    const,
    convert,
)
from compiler.ir.function import IRModule, PrimFunc
from compiler.ir.serialize import IRFormatError, from_json, to_json, to_json_string
from compiler.ir.stmt import (
    Allocate,
    Block,
    BlockRealize,
    BufferRegion,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    IterKind,
    IterVar,
    SeqStmt,
    Stmt,
)
from compiler.ir.structural import structural_equal, structural_hash

__all__ = [
    "Allocate",
    "Block",
    "BlockRealize",
    "Buffer",
    "BufferLoad",
    "BufferRegion",
    "BufferStore",
    "Call",
    "Cast",
    "Evaluate",
    "FloatImm",
    "For",
    "ForKind",
    "IRFormatError",
    "IRModule",
    "IfThenElse",
    "IntImm",
    "IterKind",
    "IterVar",
    "PrimExpr",
    "PrimFunc",
    "Range",
    "Select",
    "SeqStmt",
    "Stmt",
    "Var",
    "const",
    "convert",
    "from_json",
    "structural_equal",
    "structural_hash",
    "to_json",
    "to_json_string",
]
