"""How IR dtypes and constants are spelled in textual LLVM IR."""

from __future__ import annotations

import struct

from compiler.errors import CompilerError
from compiler.ir import expr as E


class CodegenError(CompilerError):
    """IR that the LLVM code generator cannot translate; the message names the node."""


_VALUE_TYPES = {
    "bool": "i1",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "i8",
    "float16": "half",
    "float32": "float",
    "float64": "double",
}

# The type of index math unless a function's bounds prove a narrower one enough (a GPU
# kernel's, ``compiler.lower.narrow_index``).
INDEX_TYPE = "i64"


def value_type(dtype: str, index: bool = False, index_type: str = INDEX_TYPE) -> str:
    """The LLVM type of a value of ``dtype``; integer index math is done in
    ``index_type``."""
    if index and E.is_int(dtype):
        return index_type
    try:
        return _VALUE_TYPES[dtype]
    except KeyError:
        raise CodegenError(
            f"dtype {dtype!r} has no LLVM type; use one of {sorted(_VALUE_TYPES)}"
        ) from None


def storage_type(dtype: str) -> str:
    """The in-memory type: bools are bytes, as in numpy."""
    return "i8" if dtype == "bool" else value_type(dtype)


def is_signed(dtype: str) -> bool:
    return E.is_int(dtype) and not dtype.startswith("uint")


def int_literal(value: int, dtype: str, index: bool = False, index_type: str = INDEX_TYPE) -> str:
    """An integer constant, wrapped to the signed range of its LLVM type."""
    if dtype == "bool":
        return "true" if value else "false"
    width = int(index_type[1:]) if index else E.bits(dtype)
    wrapped = value & ((1 << width) - 1)
    if wrapped >= 1 << (width - 1):
        wrapped -= 1 << width
    return str(wrapped)


def float_literal(value: float, dtype: str) -> str:
    """A float constant in LLVM's exact hex form, rounded to ``dtype`` first."""
    if dtype == "float16":
        (half_bits,) = struct.unpack("<H", struct.pack("<e", value))
        return f"0xH{half_bits:04X}"
    if dtype == "float32":
        (value,) = struct.unpack("<f", struct.pack("<f", value))
    (double_bits,) = struct.unpack("<Q", struct.pack("<d", value))
    return f"0x{double_bits:016X}"


def string_constant(text: str) -> tuple[str, int]:
    """An LLVM ``c"..."`` initializer for ``text`` with a terminating NUL, and its length."""
    data = text.encode("utf-8") + b"\0"
    chars = []
    for byte in data:
        if 32 <= byte < 127 and byte not in (ord('"'), ord("\\")):
            chars.append(chr(byte))
        else:
            chars.append(f"\\{byte:02X}")
    return 'c"' + "".join(chars) + '"', len(data)
