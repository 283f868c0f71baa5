"""The ONNX frontend: ``import_onnx`` turns a model into a Graph with static types.

The model is checked whole before anything converts: every operator it uses must have
a converter or a folder (all the unsupported ones are named at once), and every
attribute must be one its operator's schema has, of the schema's type. Then each node,
in order, is folded with numpy when all its inputs are known at import
(``onnx_fold``), or converted into graph nodes (``onnx_convert``). The Graph is only
made at the end, so an error leaves nothing half-imported behind.

Values keep their ONNX names, the graph's outputs included; the nodes one ONNX node
becomes carry its name (``#index op_type`` when it has none), which every message
names too.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import onnx
from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
from onnx import helper, numpy_helper

from compiler.graph import onnx_convert, onnx_convert_nn
from compiler.graph.ir import Graph, GraphError, Node, TensorType
from compiler.graph.onnx_fold import FOLDERS
from compiler.graph.onnx_node import (
    NodeContext,
    Scope,
    UnsupportedOperatorError,
    Value,
    node_name,
    node_where,
)

__all__ = ["UnsupportedOperatorError", "import_onnx"]

_DOMAINS = ("", "ai.onnx")
CONVERTERS = onnx_convert.CONVERTERS | onnx_convert_nn.CONVERTERS


def import_onnx(
    model: onnx.ModelProto | str | os.PathLike[str] | bytes,
    shapes: Mapping[str, Sequence[int]] | None = None,
) -> Graph:
    """The Graph of ``model`` (a ModelProto, its serialized bytes, or a path to it).

    ``shapes`` fixes the dimensions of the model's inputs, by input name; it is needed
    for every input with a dynamic dimension, since the graph's types are static.
    """
    proto = _load(model)
    _refuse_external_data(proto)
    opset = _opset(proto)
    _check_operators(proto.graph, opset)
    constants = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    taken = _onnx_names(proto.graph)
    if not isinstance(model, onnx.ModelProto):
        proto = _without_initializers(proto)
    scope = Scope(
        inputs=_input_types(proto.graph, constants, shapes or {}),
        constants=constants,
        taken=taken,
    )
    read = {name for node in proto.graph.node for name in node.input}
    read |= {value.name for value in proto.graph.output}
    for index, node in enumerate(proto.graph.node):
        _convert(NodeContext(node, index, opset, scope), scope, read)
    return _graph(scope, [value.name for value in proto.graph.output])


def _load(model: onnx.ModelProto | str | os.PathLike[str] | bytes) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, bytes):
        try:
            return onnx.load_model_from_string(model)
        except DecodeError as err:
            raise GraphError(f"the bytes given are not a serialized ONNX model: {err}") from None
    path = os.fspath(model)
    if not os.path.isfile(path):
        raise GraphError(f"{path}: no such ONNX file")
    try:
        return onnx.load(path, load_external_data=False)
    except DecodeError as err:
        raise GraphError(f"{path} is not an ONNX model: {err}") from None


def _without_initializers(proto: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of the model without its initializers, once they are arrays. A parsed
    model lives in one block of memory that is given back only when the whole message
    goes, so keeping it would hold every weight twice."""
    proto.graph.ClearField("initializer")
    light = onnx.ModelProto()
    light.CopyFrom(proto)
    return light


def _refuse_external_data(model: onnx.ModelProto) -> None:
    """Refuse a tensor whose data lies in another file, before any file is opened: its
    location is a path that the model's author chose, and a server that imports a model
    sent to it would read whatever that path names on its own disk."""
    for where, tensor in _tensors(model):
        if tensor.data_location == onnx.TensorProto.EXTERNAL or tensor.external_data:
            location = next((e.value for e in tensor.external_data if e.key == "location"), "")
            raise GraphError(
                f"{where} keeps its data in another file ({location!r}); tensortune imports "
                "only models whose tensors are inside the ONNX file. Save the model as one "
                "file: onnx.save_model(onnx.load(PATH), NEW_PATH, save_as_external_data=False)"
            )


def _tensors(model: onnx.ModelProto) -> Iterator[tuple[str, onnx.TensorProto]]:
    """Every tensor of the model, named by where it is: initializers, sparse ones, and
    the tensor attributes of nodes, in subgraphs and functions too."""
    bodies: list[onnx.GraphProto | onnx.FunctionProto] = [model.graph, *model.functions]
    while bodies:
        body = bodies.pop()
        if isinstance(body, onnx.GraphProto):
            yield from _initializers(body)
        for index, node in enumerate(body.node):
            yield from _attribute_tensors(node, index)
            bodies.extend(a.g for a in node.attribute if a.HasField("g"))
            bodies.extend(g for a in node.attribute for g in a.graphs)


def _initializers(graph: onnx.GraphProto) -> Iterator[tuple[str, onnx.TensorProto]]:
    for tensor in graph.initializer:
        yield f"the initializer {tensor.name!r}", tensor
    for sparse in graph.sparse_initializer:
        yield f"the sparse initializer {sparse.values.name!r}", sparse.values
        yield f"the indices of the sparse initializer {sparse.values.name!r}", sparse.indices


def _attribute_tensors(node: onnx.NodeProto, index: int) -> Iterator[tuple[str, onnx.TensorProto]]:
    for attribute in node.attribute:
        where = f"the attribute {attribute.name!r} of node {node_name(node, index)!r}"
        sparse = [attribute.sparse_tensor, *attribute.sparse_tensors]
        yield from ((where, tensor) for tensor in [attribute.t, *attribute.tensors])
        yield from ((where, s.values) for s in sparse)
        yield from ((where, s.indices) for s in sparse)


def _opset(model: onnx.ModelProto) -> int:
    for entry in model.opset_import:
        if entry.domain in _DOMAINS:
            return int(entry.version)
    raise GraphError("the model imports no version of the default ONNX operator set")


def _check_operators(graph: onnx.GraphProto, opset: int) -> None:
    """Refuse the model before converting anything if it uses an operator that has no
    converter or folder, naming all of them."""
    unsupported: dict[str, list[tuple[str, str]]] = {}
    for index, node in enumerate(graph.node):
        if node.domain not in _DOMAINS or (
            node.op_type not in CONVERTERS and node.op_type not in FOLDERS
        ):
            op_type = f"{node.domain}.{node.op_type}" if node.domain else node.op_type
            found = (node_name(node, index), node_where(node, index))
            unsupported.setdefault(op_type, []).append(found)
    if unsupported:
        (op_type, ((name, where), *_)), *others = unsupported.items()
        also = "; ".join(f"{op} (node {nodes[0][0]!r})" for op, nodes in others)
        supported = ", ".join(sorted(set(CONVERTERS) | set(FOLDERS)))
        raise UnsupportedOperatorError(
            f"{where}: the ONNX operator {op_type} is not supported"
            + (f"; nor is {also}" if also else "")
            + f". The supported operators are: {supported}",
            op_type=op_type,
            node=name,
        )


def _check_attributes(ctx: NodeContext) -> None:
    """Each attribute must be one the operator's schema (at the model's opset) has, of
    the schema's type: a converter can then read it without checking."""
    opset = ctx.opset
    try:
        schema = onnx.defs.get_schema(ctx.op_type, opset, "")
    except onnx.defs.SchemaError:
        raise ctx.error(f"{ctx.op_type} does not exist in opset {opset}") from None
    for attribute in ctx.node.attribute:
        declared = schema.attributes.get(attribute.name)
        if declared is None:
            takes = ", ".join(sorted(schema.attributes)) or "none"
            raise ctx.error(
                f"{ctx.op_type} (opset {opset}) has no attribute {attribute.name!r}; "
                f"its attributes are: {takes}"
            )
        kind = onnx.AttributeProto.AttributeType.Name(attribute.type)
        takes = str(declared.type).rsplit(".", 1)[-1]
        if kind != takes:
            raise ctx.error(
                f"attribute {attribute.name!r} is {kind}, but {ctx.op_type} takes {takes}"
            )


def _input_types(
    graph: onnx.GraphProto, constants: Mapping[str, np.ndarray], shapes: Mapping[str, Sequence[int]]
) -> dict[str, TensorType]:
    """The type of each graph input that is not an initializer (older exporters list
    the weights as inputs too), with ``shapes`` filling in the dynamic dimensions."""
    declared = [value for value in graph.input if value.name not in constants]
    names = [value.name for value in declared]
    unknown = sorted(set(shapes) - set(names))
    if unknown:
        raise GraphError(
            f"shapes names {', '.join(map(repr, unknown))}, which the model has no input of; "
            f"its inputs are: {', '.join(map(repr, names))}"
        )
    return {value.name: _input_type(value, shapes.get(value.name)) for value in declared}


def _input_type(value: onnx.ValueInfoProto, given: Sequence[int] | None) -> TensorType:
    name = value.name
    if not value.type.HasField("tensor_type"):
        raise GraphError(f"input {name!r} is not a tensor; only tensor inputs are supported")
    tensor = value.type.tensor_type
    dtype = str(np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type)))
    if dtype != "float32":
        raise GraphError(f"input {name!r} is {dtype}; only float32 inputs are supported")
    declared: list[int | str | None] = [
        d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor.shape.dim
    ]
    if given is not None:
        return TensorType(_given_shape(name, declared, given, tensor.HasField("shape")), dtype)
    if not tensor.HasField("shape"):
        raise GraphError(
            f"input {name!r} has no shape in the model; give one with "
            f"shapes={{{json.dumps(name)}: (...)}} in Python, or --shape {name}=... on the "
            "command line"
        )
    dynamic = [(axis, d) for axis, d in enumerate(declared) if not isinstance(d, int)]
    if dynamic:
        axis, symbol = dynamic[0]
        example = tuple(d if isinstance(d, int) else 1 for d in declared)
        shown = "(" + ", ".join(str(d if d is not None else "?") for d in declared) + ")"
        raise GraphError(
            f"input {name!r} has a dynamic dimension {axis}"
            + (f" ({symbol!r})" if symbol else "")
            + f" in its shape {shown}; the importer needs static shapes. Fix it with "
            f"shapes={{{json.dumps(name)}: {example}}} in Python, or --shape "
            f"{name}={','.join(map(str, example))} on the command line"
        )
    return TensorType(tuple(int(d) for d in declared if isinstance(d, int)), dtype)


def _given_shape(
    name: str, declared: Sequence[int | str | None], given: Sequence[int], ranked: bool
) -> tuple[int, ...]:
    """``given``, checked against the model's rank and its static dimensions."""
    dims = tuple(int(d) for d in given)
    if ranked and len(dims) != len(declared):
        raise GraphError(
            f"shapes gives input {name!r} {len(dims)} dimensions {dims}, but the model "
            f"declares {len(declared)}"
        )
    for axis, (want, got) in enumerate(zip(declared, dims, strict=False)):
        if got < 1 or (isinstance(want, int) and want != got):
            fixed = f"the model fixes it at {want}" if isinstance(want, int) else "it must be ≥ 1"
            raise GraphError(f"shapes gives input {name!r} dimension {axis} = {got}, but {fixed}")
    return dims


def _onnx_names(graph: onnx.GraphProto) -> set[str]:
    """Every value name of the model, which names made up by the importer avoid."""
    names = {value.name for value in graph.input} | {t.name for t in graph.initializer}
    for node in graph.node:
        names.update(node.input)
        names.update(node.output)
    return names


def _convert(ctx: NodeContext, scope: Scope, read: set[str]) -> None:
    """Fold or convert one node and record its first output under its ONNX name; its
    other outputs (a mask, running statistics, indices) must be unused."""
    _check_attributes(ctx)
    for extra in ctx.node.output[1:]:
        if extra and extra in read:
            raise ctx.unsupported(
                f"output {extra!r} is used, but only the first output of {ctx.op_type} is"
            )
    output = ctx.node.output[0]
    if scope.resolve(output) is not None:
        raise ctx.error(f"output {output!r} is already made by an earlier node or is an input")
    if ctx.op_type in FOLDERS and ctx.all_known():
        result: Value = np.asarray(FOLDERS[ctx.op_type](ctx))
    elif ctx.op_type in CONVERTERS:
        result = CONVERTERS[ctx.op_type](ctx)
    else:
        computed = [
            ctx.node.input[i] for i in range(len(ctx.node.input)) if ctx.constant(i) is None
        ]
        raise ctx.unsupported(
            f"{ctx.op_type} is supported only on values known at import, where it is folded; "
            f"{', '.join(map(repr, computed))} is computed at run time"
        )
    if isinstance(result, str) and result in scope.constants:
        result = scope.constants[result]  # a constant a converter reshaped keeps its name
    made_here = {node.output for node in ctx.nodes}
    if isinstance(result, np.ndarray):
        scope.constants[output] = result
    elif result in made_here:
        _rename(ctx, scope, result, output)
    else:
        scope.aliases[output] = result
    scope.nodes.extend(ctx.nodes)


def _rename(ctx: NodeContext, scope: Scope, old: str, new: str) -> None:
    """Give the value a converter made last the ONNX node's output name."""
    scope.types[new] = scope.types.pop(old)
    ctx.nodes[:] = [
        dataclasses.replace(
            node,
            inputs=tuple(new if value == old else value for value in node.inputs),
            output=new if node.output == old else node.output,
        )
        for node in ctx.nodes
    ]


def _graph(scope: Scope, outputs: list[str]) -> Graph:
    """The Graph, with each model output under its own name and only the constants
    some node or output reads."""
    for output in outputs:
        value = scope.resolve(output)
        if value is None:
            raise GraphError(f"model output {output!r} is made by no node")
        if value == output:
            continue
        if value in scope.constants:
            scope.constants[output] = scope.constants[value]
        else:
            # An output that passes another value through (an Identity) is a copy of it.
            value_type = scope.type_of(value)
            attrs = {"shape": value_type.shape}
            scope.nodes.append(Node("reshape", (value,), output, attrs, f"output {output}"))
            scope.types[output] = value_type
    read = {value for node in scope.nodes for value in node.inputs} | set(outputs)
    constants = {name: array for name, array in scope.constants.items() if name in read}
    types = dict(scope.inputs) | scope.types
    types |= {name: TensorType(a.shape, str(a.dtype)) for name, a in constants.items()}
    graph = Graph(scope.inputs, constants, scope.nodes, tuple(outputs), types)
    graph.check()
    return graph
