"""Index maps: a buffer layout as plain text, ``"n, c, h, w -> n, c // 16, h, w, c % 16"``.

``transform_layout`` takes its map in this form so that a trace stores it as a
string and a replay rebuilds it with a small parser, never by evaluating Python.
The outputs are integer expressions of the input names: constants, ``+ - *``,
and ``//`` and ``%`` by positive constants, which covers splitting a dimension
(``c // 16``, ``c % 16``), permuting dimensions, and fusing them (``i * 8 + j``).

A map is usable on a buffer only when it is a bijection from the buffer's shape
onto a new shape that starts at 0 in every dimension, so that every element has
exactly one place and no place is left over (padding is not supported). The
check enumerates the points of each group of inputs that share outputs, which is
exact and cheap for the maps above (a split enumerates one dimension).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from compiler.ir import expr as E
from compiler.ir.analysis import substitute
from compiler.ir.expr import IntImm, PrimExpr, Var
from compiler.ir.node import visit
from compiler.schedule.errors import ScheduleError

# The most points one group of inputs may have for the bijectivity check.
MAX_ENUMERATED_POINTS = 1 << 22

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_]\w*)|(->|//|[-+*%(),]))")

_NUMPY_OPS: dict[type[E.BinaryOp], Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    E.Add: np.add,
    E.Sub: np.subtract,
    E.Mul: np.multiply,
    E.FloorDiv: np.floor_divide,
    E.FloorMod: np.mod,
}


@dataclass(frozen=True, eq=False)
class IndexMap:
    """A map from the indices of a buffer (``inputs``) to its indices in a new
    layout (``outputs``, expressions of the inputs)."""

    inputs: tuple[Var, ...]
    outputs: tuple[PrimExpr, ...]

    @staticmethod
    def parse(text: str) -> IndexMap:
        """The map written as ``"a, b -> b, a"``; raises ScheduleError naming the
        text and what is wrong with it."""
        if not isinstance(text, str):
            raise ScheduleError(
                f"an index map is text such as 'i, j -> j // 16, i, j % 16', got {text!r}"
            )
        return _Parser(text).parse()

    def __str__(self) -> str:
        names = ", ".join(v.name for v in self.inputs)
        return f"{names} -> {', '.join(str(e) for e in self.outputs)}"

    def apply(self, indices: Sequence[PrimExpr]) -> tuple[PrimExpr, ...]:
        """The new-layout indices of the element at ``indices`` (same arity as inputs)."""
        mapping = dict(zip(self.inputs, indices, strict=True))
        return tuple(substitute(e, mapping) for e in self.outputs)

    def new_shape(self, shape: Sequence[int], buffer: str) -> tuple[int, ...]:
        """The shape the map gives a buffer of ``shape``; raises ScheduleError when the
        map does not fit that shape or is not a bijection onto the new shape."""
        where = f"index map '{self}' on buffer {buffer} of shape {list(shape)}"
        if len(shape) != len(self.inputs):
            raise ScheduleError(
                f"{where}: the map takes {len(self.inputs)} indices but the buffer has "
                f"{len(shape)} dimensions; write one input name per dimension"
            )
        extents: list[int] = [0] * len(self.outputs)
        for group_inputs, group_outputs in _groups(self.inputs, self.outputs):
            for position, extent in _group_extents(
                group_inputs, group_outputs, self.inputs, self.outputs, shape, where
            ).items():
                extents[position] = extent
        return tuple(extents)

    def inverse(self, shape: Sequence[int]) -> IndexMap | None:
        """The map from the new layout back to ``shape``, when each input is a whole-
        number combination of outputs (permutations, splits) or one digit of one
        output (``i = o // 4``, ``j = o % 4`` undo a fuse); None for other maps."""
        new_shape = self.new_shape(shape, "(inverted)")
        outputs = tuple(Var(f"o{k}", "int32") for k in range(len(self.outputs)))
        found: dict[int, PrimExpr] = {}
        for group_inputs, group_outputs in _groups(self.inputs, self.outputs):
            grid = np.indices([shape[k] for k in group_inputs], dtype=np.int64)
            grid = grid.reshape(len(group_inputs), -1)
            env = {id(self.inputs[k]): grid[row] for row, k in enumerate(group_inputs)}
            values = {
                out: np.broadcast_to(_evaluate(self.outputs[out], env), grid.shape[1:])
                for out in group_outputs
            }
            for row, k in enumerate(group_inputs):
                expr = _combination(grid[row], values, outputs)
                if expr is None:
                    expr = _digit(grid[row], values, outputs, new_shape)
                if expr is None:
                    return None
                found[k] = expr
        return IndexMap(outputs, tuple(found[k] for k in range(len(self.inputs))))


def _combination(
    target: np.ndarray, values: dict[int, np.ndarray], outputs: tuple[Var, ...]
) -> PrimExpr | None:
    """``target`` as a sum of whole multiples of the outputs, if it is one."""
    if not values:
        return E.const(0, "int32") if not target.any() else None
    order = sorted(values)
    matrix = np.stack([values[o] for o in order], axis=1).astype(np.float64)
    solution = np.linalg.lstsq(matrix, target.astype(np.float64), rcond=None)[0]
    coeffs = np.rint(solution).astype(np.int64)
    if not np.array_equal(matrix.astype(np.int64) @ coeffs, target):
        return None
    pairs = zip(order, coeffs, strict=True)
    terms = [outputs[o] * int(c) if c != 1 else outputs[o] for o, c in pairs if c]
    total: PrimExpr = terms[0] if terms else E.const(0, "int32")
    for term in terms[1:]:
        total = total + term
    return total


def _digit(
    target: np.ndarray,
    values: dict[int, np.ndarray],
    outputs: tuple[Var, ...],
    new_shape: tuple[int, ...],
) -> PrimExpr | None:
    """``target`` as ``output // d % e`` for one output, if it is one."""
    for out, value in values.items():
        for d in _divisors(new_shape[out]):
            for e in _divisors(new_shape[out] // d):
                if np.array_equal(value // d % e, target):
                    expr: PrimExpr = outputs[out] // d if d > 1 else outputs[out]
                    return expr % e if e < new_shape[out] // d else expr
    return None


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _groups(
    inputs: tuple[Var, ...], outputs: tuple[PrimExpr, ...]
) -> list[tuple[list[int], list[int]]]:
    """Positions of inputs and outputs in groups that share no input: the map is a
    bijection when each group is one."""
    owner = list(range(len(inputs)))

    def root(k: int) -> int:
        while owner[k] != k:
            k = owner[k]
        return k

    used = [_inputs_used(e, inputs) for e in outputs]
    for positions in used:
        for other in positions[1:]:
            owner[root(other)] = root(positions[0])
    groups: dict[int, tuple[list[int], list[int]]] = {}
    for k in range(len(inputs)):
        groups.setdefault(root(k), ([], []))[0].append(k)
    constant_groups: list[tuple[list[int], list[int]]] = []
    for out, positions in enumerate(used):
        if positions:
            groups[root(positions[0])][1].append(out)
        else:
            constant_groups.append(([], [out]))
    return [*groups.values(), *constant_groups]


def _inputs_used(e: PrimExpr, inputs: tuple[Var, ...]) -> list[int]:
    ids = {id(v): k for k, v in enumerate(inputs)}
    found: list[int] = []
    visit(e, lambda n: found.append(ids[id(n)]) if id(n) in ids else None)
    return sorted(set(found))


def _group_extents(
    group_inputs: list[int],
    group_outputs: list[int],
    inputs: tuple[Var, ...],
    outputs: tuple[PrimExpr, ...],
    shape: Sequence[int],
    where: str,
) -> dict[int, int]:
    sizes = [shape[k] for k in group_inputs]
    points = math.prod(sizes)
    if points > MAX_ENUMERATED_POINTS:
        raise ScheduleError(
            f"{where}: outputs {group_outputs} mix inputs of {points} points, more than "
            f"{MAX_ENUMERATED_POINTS} this check enumerates; split the map into smaller groups"
        )
    grid = np.indices(sizes, dtype=np.int64).reshape(len(sizes), -1)
    env = {id(inputs[k]): grid[row] for row, k in enumerate(group_inputs)}
    extents: dict[int, int] = {}
    flat = np.zeros(max(points, 1), dtype=np.int64)
    for out in group_outputs:
        values = np.broadcast_to(_evaluate(outputs[out], env), flat.shape)
        low, high = int(values.min()), int(values.max())
        if low != 0:
            raise ScheduleError(
                f"{where}: output {out} ({outputs[out]}) starts at {low}, not 0; shift it so "
                "that the new layout starts at 0"
            )
        extents[out] = high + 1
        flat = flat * extents[out] + values
    places = math.prod(extents.values())
    distinct = len(np.unique(flat))
    if distinct != max(points, 1):
        names = ", ".join(inputs[k].name for k in group_inputs)
        raise ScheduleError(
            f"{where}: it sends {points} elements (inputs {names}) to only {distinct} places, "
            "so two elements would share one; use a map that keeps every element apart"
        )
    if places != distinct:
        raise ScheduleError(
            f"{where}: the new dimensions {[extents[o] for o in group_outputs]} have "
            f"{places} places for {points} elements; padding is not supported, so use split "
            "factors that divide the dimension"
        )
    return extents


def _evaluate(e: PrimExpr, env: dict[int, np.ndarray]) -> np.ndarray:
    if isinstance(e, IntImm):
        return np.asarray(e.value, dtype=np.int64)
    if isinstance(e, Var):
        return env[id(e)]
    if isinstance(e, E.BinaryOp) and type(e) in _NUMPY_OPS:
        return _NUMPY_OPS[type(e)](_evaluate(e.a, env), _evaluate(e.b, env))
    raise AssertionError(f"the index map parser does not make {type(e).__name__}")


class _Parser:
    """Recursive descent over ``names -> expr, expr, ...`` with the usual precedence."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = self._tokenize(text)
        self.at = 0
        self.names: dict[str, Var] = {}

    def fail(self, why: str) -> ScheduleError:
        return ScheduleError(
            f"index map {self.text!r}: {why}; write it as 'i, j -> j // 16, i, j % 16' "
            "(names, integers, + - * and // or % by a positive integer)"
        )

    def _tokenize(self, text: str) -> list[str]:
        tokens: list[str] = []
        position = 0
        while position < len(text.rstrip()):
            match = _TOKEN.match(text, position)
            if match is None:
                raise self.fail(f"unexpected character {text[position:].strip()[0]!r}")
            tokens.append(match.group(match.lastindex or 0))
            position = match.end()
        return tokens

    def peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise self.fail(f"expected {expected or 'more'} at token {self.at}, got {token!r}")
        self.at += 1
        return token

    def parse(self) -> IndexMap:
        inputs = [self.input_name()]
        while self.peek() == ",":
            self.take(",")
            inputs.append(self.input_name())
        self.take("->")
        outputs = [self.sum()]
        while self.peek() == ",":
            self.take(",")
            outputs.append(self.sum())
        if self.peek() is not None:
            raise self.fail(f"unexpected {self.peek()!r} after the last output")
        return IndexMap(tuple(inputs), tuple(outputs))

    def input_name(self) -> Var:
        name = self.take()
        if not name.isidentifier():
            raise self.fail(f"input {name!r} is not a name")
        if name in self.names:
            raise self.fail(f"input {name!r} appears twice")
        self.names[name] = Var(name, "int32")
        return self.names[name]

    def sum(self) -> PrimExpr:
        value = self.product()
        while self.peek() in ("+", "-"):
            op = self.take()
            right = self.product()
            value = value + right if op == "+" else value - right
        return value

    def product(self) -> PrimExpr:
        value = self.atom()
        while self.peek() in ("*", "//", "%"):
            op = self.take()
            right = self.atom()
            if op == "*":
                value = value * right
                continue
            if not isinstance(right, IntImm) or right.value <= 0:
                raise self.fail(f"{op} needs a positive integer on its right, got {right}")
            value = value // right if op == "//" else value % right
        return value

    def atom(self) -> PrimExpr:
        token = self.take()
        if token == "(":
            value = self.sum()
            self.take(")")
            return value
        if token.isdigit():
            return E.const(int(token), "int32")
        if token in self.names:
            return self.names[token]
        raise self.fail(f"{token!r} is neither an input name nor an integer")
