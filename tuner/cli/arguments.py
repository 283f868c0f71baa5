"""Argument types shared by the ``tensortune`` commands: numbers and targets are checked
where they are read, so a value no database column or loop can hold, or a target the
compiler does not know, is a usage error (exit 2) naming the flag, never an overflow or
a traceback deep inside."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from compiler.target.errors import TargetError
from compiler.target.parse import parse_target

INT64_MAX = 2**63 - 1
TARGET_FORMS = (
    "llvm (this machine's CPU), 'llvm -mcpu=CPU' (a CPU by LLVM's name, e.g. znver4 or "
    "skylake-avx512; -mattr=+avx2,+fma names features, -num-cores=N the threads), or "
    "'cuda -arch=sm_XX' (an NVIDIA GPU, e.g. sm_80; needs the cuda extra)"
)


def int_in_range(low: int, high: int = INT64_MAX) -> Callable[[str], int]:
    """An argparse ``type`` for an integer from ``low`` to ``high`` (a signed 64-bit
    integer by default, what every stored count and id is)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"{text} is out of range: give an integer from {low} to {high}"
            )
        return value

    return parse


def add_target_argument(parser: argparse.ArgumentParser) -> None:
    """``--target``, checked as it is read (``known_target``), defaulting to this CPU."""
    parser.add_argument(
        "--target",
        type=known_target,
        default="llvm",
        metavar="TARGET",
        help=f"what to compile for: {TARGET_FORMS}; default: llvm",
    )


def known_target(text: str) -> str:
    """An argparse ``type`` for a target: the text as given, once the compiler knows it."""
    try:
        parse_target(text)
    except TargetError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text
