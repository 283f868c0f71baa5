"""No function of the project's packages is longer than a reader can hold at once.

A function over the limit is split where its steps already are: a helper per step,
each with a name that says what it does.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("compiler", "tuner", "workers", "db")
MAX_LINES = 120


def _function_lengths(source: str) -> list[tuple[str, int, int]]:
    """(name, first line, lines) of every function and method in ``source``."""
    return [
        (node.name, node.lineno, (node.end_lineno or node.lineno) - node.lineno + 1)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]


def test_no_function_is_longer_than_the_limit() -> None:
    too_long = [
        f"{path.relative_to(ROOT)}:{line} {name} ({length} lines)"
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for name, line, length in _function_lengths(path.read_text(encoding="utf-8"))
        if length > MAX_LINES
    ]
    assert not too_long, f"functions over {MAX_LINES} lines: {too_long}"


def test_the_length_counts_a_function_from_its_def_to_its_last_line() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    source = f"def long():\n{body}\n\nasync def short():\n    return 1\n"
    assert _function_lengths(source) == [("long", 1, MAX_LINES + 1), ("short", MAX_LINES + 3, 2)]
