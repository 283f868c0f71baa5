"""Operator fusion: the graph cut into groups, each one PrimFunc.

A group is a chain: its first node (the anchor) and the elementwise and broadcast
nodes that follow it, each reading the output of the one before, which nothing else
reads. So a convolution takes its bias, batch-norm shift, residual add and
activation; an elementwise node with no anchor before it heads a group of its own;
a reduction (softmax, layer norm, pooling) and an injective node (reshape,
transpose, concatenate, pad) stay alone (``compiler.graph.ops.Pattern``).

A value that several elementwise nodes read joins them to its group when they form
one chain of their own that every reader of the value belongs to: an activation
that reads its input twice, such as GELU's ``x * (1 + erf(x / sqrt 2)) / 2`` or
Swish's ``x * sigmoid(x)``, becomes the epilogue of the dense layer or convolution
that makes ``x``, instead of a kernel that reads ``x`` back from memory.

A reshape or transpose that one other node reads (through more of them, maybe) is
that node's group's *prologue*: the group indexes the data in place, so the
attention heads' transposes cost no kernel of their own (``ops.view_of``). A lone
reshape left over is no function at all but a view (``FusedGroup.is_view``).

A group's function takes the values it reads from outside (model inputs, weights,
other groups' outputs) as parameters named ``p0``, ``p1``, ... in the order it
first reads them, and its output last: two groups that compute the same thing on
values of the same types are the same workload, whatever the values are called.
The parameters that are the model's weights are marked constant
(``compiler.ir.layout_free``), so a schedule may store them in its own layout.
"""

from __future__ import annotations

from dataclasses import dataclass

from compiler import te
from compiler.graph.ir import Graph, Node
from compiler.graph.ops import OPS, VIEW_OPS, Pattern, tensor_of, view_of
from compiler.ir.function import PrimFunc
from compiler.ir.layout_free import mark_layout_free

# Groups that an elementwise or broadcast node may join as their epilogue.
TAKES_EPILOGUE = (Pattern.COMPLEX, Pattern.ELEMWISE, Pattern.BROADCAST)


@dataclass(frozen=True)
class FusedGroup:
    """``nodes``: the anchor and its epilogue; ``prologue``: the reshapes and
    transposes they read in place, sources first."""

    nodes: tuple[Node, ...]
    inputs: tuple[str, ...]
    prologue: tuple[Node, ...] = ()

    @property
    def output(self) -> str:
        return self.nodes[-1].output

    @property
    def anchor(self) -> Node:
        return self.nodes[0]

    @property
    def is_view(self) -> bool:
        """A lone reshape: row-major data needs no kernel to change its shape, so the
        executor makes its output a view of its input."""
        return len(self.nodes) == 1 and self.anchor.op == "reshape" and not self.prologue

    @property
    def name(self) -> str:
        """The ops of the group, joined: ``conv2d_add_relu``, ``transpose_matmul``."""
        return "_".join(node.op for node in (*self.prologue, *self.nodes))

    def prim_func(self, graph: Graph) -> PrimFunc:
        """The group as one function of its inputs (``p0``, ``p1``, ...) and output,
        with the inputs that are constants of ``graph`` marked so."""
        types = graph.types
        placeholders = {
            value: te.placeholder(types[value].shape, types[value].dtype, name=f"p{k}")
            for k, value in enumerate(self.inputs)
        }
        tensors = dict(placeholders)
        for node in self.prologue:
            tensors[node.output] = view_of(node, tensors[node.inputs[0]])
        for node in self.nodes:
            tensors[node.output] = tensor_of(node, [tensors[value] for value in node.inputs])
        func = te.create_prim_func([*placeholders.values(), tensors[self.output]])
        weights = [k for k, value in enumerate(self.inputs) if value in graph.constants]
        return mark_layout_free(func, weights) if weights else func


def fuse(graph: Graph) -> list[FusedGroup]:
    """The groups of ``graph``, in an order where each runs after those it reads."""
    consumers = graph.consumers()
    outputs = set(graph.outputs)
    in_place = _read_in_place(graph, consumers, outputs)
    chains: list[list[Node]] = []
    chain_of: dict[str, int] = {}  # a chain's last output -> the chain
    for node in graph.nodes:
        if node.output in in_place:
            continue
        joined = _chain_to_join(node, chains, chain_of, consumers, outputs)
        if joined is None:
            chains.append([node])
            joined = len(chains) - 1
        else:
            chain_of.pop(chains[joined][-1].output)
            chains[joined].append(node)
        chain_of[node.output] = joined
    chains = _join_activations(chains, consumers, outputs)
    groups = []
    for chain in chains:
        prologue = _prologue(chain, in_place)
        groups.append(FusedGroup(tuple(chain), _outside_inputs([*prologue, *chain]), prologue))
    return _in_dependency_order(groups)


def _read_in_place(
    graph: Graph, consumers: dict[str, list[Node]], outputs: set[str]
) -> dict[str, Node]:
    """The reshapes and transposes that their one reader indexes in place, by output:
    those read by one node that is itself no reshape or transpose, or is one read in
    place in turn."""
    found: dict[str, Node] = {}
    for node in reversed(graph.nodes):
        readers = consumers.get(node.output, [])
        if node.op not in VIEW_OPS or node.output in outputs or len(readers) != 1:
            continue
        if readers[0].op not in VIEW_OPS or readers[0].output in found:
            found[node.output] = node
    return found


def _prologue(chain: list[Node], in_place: dict[str, Node]) -> tuple[Node, ...]:
    """The nodes read in place that ``chain`` reads, through each other, sources first."""
    found: list[Node] = []

    def include(value: str) -> None:
        node = in_place.get(value)
        if node is None or any(n.output == value for n in found):
            return
        include(node.inputs[0])
        found.append(node)

    for node in chain:
        for value in node.inputs:
            include(value)
    return tuple(found)


def _in_dependency_order(groups: list[FusedGroup]) -> list[FusedGroup]:
    """A group may read a group begun after it (a residual add joins the convolution
    group that started first), so order them by what they read (depth first)."""
    made_by = {group.output: group for group in groups}
    ordered: list[FusedGroup] = []
    placed: set[str] = set()

    def place(group: FusedGroup) -> None:
        if group.output in placed:
            return
        placed.add(group.output)
        for value in group.inputs:
            if value in made_by:
                place(made_by[value])
        ordered.append(group)

    for group in groups:
        place(group)
    return ordered


def _chain_to_join(
    node: Node,
    chains: list[list[Node]],
    chain_of: dict[str, int],
    consumers: dict[str, list[Node]],
    outputs: set[str],
) -> int | None:
    """The chain ``node`` extends: the first input it reads that ends a chain taking an
    epilogue, read by ``node`` alone and not a model output."""
    if OPS[node.op].pattern not in (Pattern.ELEMWISE, Pattern.BROADCAST):
        return None
    for value in node.inputs:
        chain = chain_of.get(value)
        if chain is None or value in outputs or len(consumers.get(value, [])) != 1:
            continue
        if OPS[chains[chain][0].op].pattern in TAKES_EPILOGUE:
            return chain
    return None


def _join_activations(
    chains: list[list[Node]], consumers: dict[str, list[Node]], outputs: set[str]
) -> list[list[Node]]:
    """``chains`` with each elementwise chain that holds every reader of another
    chain's last value appended to that chain (see the module docstring)."""
    made_by = {chain[-1].output: k for k, chain in enumerate(chains)}
    joined: dict[int, int] = {}  # an absorbed chain -> the chain it joined
    for k, chain in enumerate(chains):
        if OPS[chain[0].op].pattern not in (Pattern.ELEMWISE, Pattern.BROADCAST):
            continue
        members = {id(node) for node in chain}
        for value in dict.fromkeys(v for node in chain for v in node.inputs):
            target = made_by.get(value)
            while target in joined:
                target = joined[target]
            if target is None or target == k or value in outputs:
                continue
            takes = OPS[chains[target][0].op].pattern in TAKES_EPILOGUE
            if takes and all(id(reader) in members for reader in consumers.get(value, [])):
                chains[target] = [*chains[target], *chain]
                joined[k] = target
                break
    return [chain for k, chain in enumerate(chains) if k not in joined]


def _outside_inputs(chain: list[Node]) -> tuple[str, ...]:
    made = {node.output for node in chain}
    found: dict[str, None] = {}
    for node in chain:
        for value in node.inputs:
            if value not in made:
                found.setdefault(value)
    return tuple(found)
