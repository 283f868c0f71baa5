"""What converting one ONNX node works with: the values made so far (``Scope``) and
the node's inputs, attributes and the graph nodes it becomes (``NodeContext``).

A value known at import (an initializer, a Constant, anything folded from them) is a
numpy array in ``Scope.constants``; a value computed at run time has a type in
``Scope.types`` and is the output of a graph node. Every graph node's type comes from
building its tensor expression on placeholders of its inputs' types, the same
expression the executor builds, so the importer and the executor cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from compiler.graph.ir import GraphError, Node, TensorType
from compiler.graph.ops import output_type

# What a converter returns: the name of a graph value, or an array known at import.
Value = str | np.ndarray


class UnsupportedOperatorError(GraphError):
    """An ONNX operator, or a use of one, that the importer cannot convert. ``op_type``
    and ``node`` say which, for a caller that reports or works around it."""

    def __init__(self, message: str, *, op_type: str, node: str) -> None:
        super().__init__(message)
        self.op_type = op_type
        self.node = node


@dataclass
class Scope:
    """The graph under construction: ONNX values are named as in the model, so
    ``aliases`` only records the values an Identity or Dropout passes through."""

    inputs: dict[str, TensorType]
    constants: dict[str, np.ndarray]
    taken: set[str]
    types: dict[str, TensorType] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)

    def resolve(self, name: str) -> str | None:
        """The graph value the ONNX value ``name`` is, or None if nothing made it yet."""
        value = self.aliases.get(name, name)
        if value in self.inputs or value in self.constants or value in self.types:
            return value
        return None

    def type_of(self, value: str) -> TensorType:
        array = self.constants.get(value)
        if array is not None:
            return TensorType(tuple(array.shape), str(array.dtype))
        return self.types[value] if value in self.types else self.inputs[value]

    def fresh(self, base: str) -> str:
        """A name no ONNX value of the model and no earlier fresh name has."""
        name, count = base, 0
        while name in self.taken:
            count += 1
            name = f"{base}_{count}"
        self.taken.add(name)
        return name


def node_name(node: onnx.NodeProto, index: int) -> str:
    """The ONNX node's name, or ``#index op_type`` when it has none."""
    return str(node.name) or f"#{index} {node.op_type}"


def node_where(node: onnx.NodeProto, index: int) -> str:
    """How messages name a node: ``node 'conv1' (Conv)``, or ``node #3 Relu``."""
    return f"node {node.name!r} ({node.op_type})" if node.name else f"node #{index} {node.op_type}"


class NodeContext:
    """One ONNX node being converted. Converters read its inputs and attributes here
    and emit graph nodes through ``emit``; the importer adds those nodes to the graph
    once the converter has returned."""

    def __init__(self, node: onnx.NodeProto, index: int, opset: int, scope: Scope) -> None:
        self.node = node
        self.opset = opset
        self.name = node_name(node, index)
        self.where = node_where(node, index)
        self.nodes: list[Node] = []
        self._scope = scope
        self._attributes = {a.name: a for a in node.attribute}

    @property
    def op_type(self) -> str:
        return str(self.node.op_type)

    def error(self, message: str) -> GraphError:
        return GraphError(f"{self.where}: {message}")

    def unsupported(self, message: str) -> UnsupportedOperatorError:
        return UnsupportedOperatorError(
            f"{self.where}: {message}", op_type=self.op_type, node=self.name
        )

    # ---- inputs ---------------------------------------------------------------------------

    def has(self, index: int) -> bool:
        """Whether optional input ``index`` is given (ONNX leaves it out or names it '')."""
        return index < len(self.node.input) and self.node.input[index] != ""

    def value(self, index: int) -> str:
        if not self.has(index):
            raise self.error(f"input {index} is missing; {self.op_type} needs it")
        name = self.node.input[index]
        value = self._scope.resolve(name)
        if value is None:
            raise self.error(
                f"input {name!r} is made by no earlier node and is neither a graph input nor "
                "an initializer (nodes must come in topological order)"
            )
        return value

    def values(self) -> list[str]:
        """Every input given, in order."""
        return [self.value(i) for i in range(len(self.node.input)) if self.has(i)]

    def constant(self, index: int) -> np.ndarray | None:
        """Input ``index`` if it is given and known at import."""
        return self._scope.constants.get(self.value(index)) if self.has(index) else None

    def known(self, index: int, what: str) -> np.ndarray:
        """Input ``index``, which the conversion needs at import (a shape, axes, ...)."""
        array = self.constant(index)
        if array is None:
            raise self.unsupported(
                f"input {index} ({what}, {self.node.input[index]!r}) must be known at import: "
                "a constant, or computed from constants and shapes; here it is computed at "
                "run time"
            )
        return array

    def all_known(self) -> bool:
        return all(self.constant(i) is not None for i in range(len(self.node.input)) if self.has(i))

    def type(self, index: int) -> TensorType:
        return self._scope.type_of(self.value(index))

    def shape(self, index: int) -> tuple[int, ...]:
        return self.type(index).shape

    def shape_of(self, value: str) -> tuple[int, ...]:
        return self._scope.type_of(value).shape

    # ---- attributes -----------------------------------------------------------------------

    def attr(self, name: str, default: Any = None) -> Any:
        """The attribute as Python data (ints, floats, str, tuples, arrays); the importer
        has checked its type against the operator's schema already."""
        attribute = self._attributes.get(name)
        if attribute is None:
            return default
        value = helper.get_attribute_value(attribute)
        if isinstance(value, bytes):
            return value.decode()
        if isinstance(value, onnx.TensorProto):
            return numpy_helper.to_array(value)
        if isinstance(value, list):
            return tuple(v.decode() if isinstance(v, bytes) else v for v in value)
        return value

    def required(self, name: str) -> Any:
        """An attribute the operator cannot do without (the schema has no default)."""
        value = self.attr(name)
        if value is None:
            raise self.error(f"attribute {name!r} is required")
        return value

    def ints(self, name: str, default: Sequence[int] | None, length: int) -> tuple[int, ...]:
        """An ints attribute that must list ``length`` values (one per spatial axis ...)."""
        value = self.attr(name, default) if default is not None else self.required(name)
        if len(value) != length:
            raise self.error(f"attribute {name!r} must list {length} ints, got {list(value)}")
        return tuple(int(v) for v in value)

    def axis(self, axis: int, rank: int, what: str = "axis") -> int:
        """``axis`` counted from 0; ONNX lets it count from the end when negative."""
        if not -rank <= axis < rank:
            raise self.error(f"{what} {axis} is out of range for rank {rank}")
        return axis % rank

    def raw_axes(self, attribute: str, input_index: int) -> list[int] | None:
        """The axes of a node that took them as an attribute in older opsets and as an
        input since, as given; None when neither is."""
        if self.has(input_index):
            return [int(a) for a in self.known(input_index, "axes").reshape(-1)]
        if attribute in self._attributes:
            return [int(a) for a in self.attr(attribute)]
        return None

    def axes(self, attribute: str, input_index: int, rank: int) -> tuple[int, ...] | None:
        """``raw_axes`` counted from 0 and sorted, for a value of ``rank`` dimensions."""
        given = self.raw_axes(attribute, input_index)
        if given is None:
            return None
        axes = tuple(sorted(self.axis(a, rank, "axes entry") for a in given))
        if len(set(axes)) != len(axes):
            raise self.error(f"axes {given} name an axis twice")
        return axes

    # ---- output ---------------------------------------------------------------------------

    def emit(self, op: str, inputs: Sequence[Value], **attrs: Any) -> str:
        """A graph node applying ``op`` to ``inputs`` (arrays become new constants); its
        output's type is read from the tensor expression the node builds."""
        names = [self._operand(v) for v in inputs]
        types = [self._scope.type_of(n) for n in names]
        for name, value_type in zip(names, types, strict=True):
            if value_type.dtype != "float32":
                raise self.unsupported(
                    f"{name!r} is {value_type.dtype}; only float32 values are computed at run "
                    "time, and this one could not be folded at import"
                )
        base = self.node.output[0] if self.node.output else self.name
        node = Node(op, tuple(names), self._scope.fresh(f"{base}_{op}"), attrs, self.name)
        self._scope.types[node.output] = output_type(node, types)
        self.nodes.append(node)
        return node.output

    def reshape(self, value: str, shape: Sequence[int]) -> str:
        """``value`` under ``shape``: itself when it has that shape already, a constant
        reshaped at import when it is one, else a reshape node."""
        dims = tuple(int(d) for d in shape)
        if dims == self.shape_of(value):
            return value
        array = self._scope.constants.get(value)
        if array is not None:
            return self._operand(array.reshape(dims))
        return self.emit("reshape", [value], shape=dims)

    def _operand(self, value: Value) -> str:
        if isinstance(value, str):
            return value
        base = self.node.output[0] if self.node.output else self.name
        name = self._scope.fresh(f"{base}_const")
        self._scope.constants[name] = value
        return name


Converter = Callable[[NodeContext], Value]


class ConverterTable(dict[str, Converter]):
    """Converters (or folders) by ONNX op type, filled by ``register``."""

    def register(self, *op_types: str) -> Callable[[Converter], Converter]:
        def register(convert: Converter) -> Converter:
            for op_type in op_types:
                self[op_type] = convert
            return convert

        return register
