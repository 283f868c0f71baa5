"""Argument types shared by the ``tensortune`` commands: numbers are checked where they
are read, so a value no database column or loop can hold is a usage error (exit 2)
naming the flag, never an overflow deep inside."""

from __future__ import annotations

import argparse
from collections.abc import Callable

INT64_MAX = 2**63 - 1


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
