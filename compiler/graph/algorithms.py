"""Other algorithms for one fused group, and the choice between them by measurement.

A 3x3 stride-1 convolution of one group, whose kernel is a model weight, can also be
computed by Winograd's F(2x2, 3x3) or F(4x4, 3x3) (``topi.nn.conv2d_winograd_nchw``,
or ``conv2d_winograd_nchwc`` for a blocked one), with the transformed kernel computed
once at build time. Like TVM's conv2d strategies, each algorithm of a group is a
workload of its own: task extraction offers all of them for tuning, and a build takes
the one whose best stored schedule ran fastest, a Winograd form only when it is faster
by a margin (``WINOGRAD_EDGE``). F(m) is offered when the output is at
least ``2 m`` pixels high and wide: with fewer tiles its padding wastes more than the
algorithm saves.

When none of them is tuned, the default schedules decide. In NCHW: F(2x2) for an
output of at most ``DEFAULT_WINOGRAD_MAX_SIZE`` pixels a side, direct otherwise
(untuned on 2 AVX2 cores, F(2x2) took 2.2 ms where direct took 5.3 ms for 256
channels at 14x14, 4.2 ms against 10.5 ms for 512 at 7x7; at 56x56 direct was the
faster). Blocked: direct, whose default schedule has a register tile (1.5-2.5 ms
for those two layers, F(2x2) 1.5-3.2 ms).
"""

from __future__ import annotations

import dataclasses

from compiler.graph.fuse import FusedGroup
from compiler.graph.ir import Graph
from compiler.graph.ops import WINOGRAD_TILE
from compiler.ir.function import PrimFunc
from compiler.target.parse import Target
from compiler.topi.nn.winograd import WINOGRAD_TILE_SIZES, winograd_applies
from compiler.tuned.lookup import TuningLookup, best_seconds

DIRECT = "direct"
BLOCKED = "conv2d_nchwc"
CONVOLUTIONS = ("conv2d", BLOCKED)
DEFAULT_WINOGRAD_MAX_SIZE = 14
# A Winograd form is taken only when its best stored time is at most this share of the
# other forms': its records flatter it more than the direct form's flatter that, and it
# rounds worse. ResNet-18 tuned on 2 vCPUs (``-mcpu=znver5``): its Winograd kernels ran
# 1.19-1.87x their records inside the model, its direct ones 1.06-1.43x; at 56x56,
# F(4x4) was taken at 0.4915 ms against the direct form's 0.4983 and ran 0.77-0.82 ms
# in the model, where the direct one runs 0.55-0.57 ms.
WINOGRAD_EDGE = 0.9


@dataclasses.dataclass(frozen=True)
class Alternative:
    """One way to compute a group: ``algorithm`` (``direct``, ``winograd2``, ...)
    and the group whose anchor says so."""

    algorithm: str
    group: FusedGroup

    @property
    def name(self) -> str:
        """The group's name, with the algorithm unless it is the direct one."""
        if self.algorithm == DIRECT:
            return self.group.name
        return f"{self.group.name}[{self.algorithm}]"


def alternatives(group: FusedGroup, graph: Graph) -> list[Alternative]:
    """The ways to compute ``group``, the direct one first."""
    found = [Alternative(DIRECT, group)]
    anchor = group.anchor
    if anchor.op not in CONVOLUTIONS or anchor.inputs[1] not in graph.constants:
        return found
    kernel_shape = graph.types[anchor.inputs[1]].shape
    if anchor.op == BLOCKED:  # (O/o, C/i, KH, KW, i, o): one group, OIHW's window
        kernel_shape = kernel_shape[:4]
    attrs = anchor.attrs
    if not winograd_applies(
        kernel_shape, attrs.get("stride", 1), attrs.get("dilation", 1), attrs.get("groups", 1)
    ):
        return found
    out_height, out_width = graph.types[anchor.output].shape[2:4]
    for tile in WINOGRAD_TILE_SIZES:
        if min(out_height, out_width) >= 2 * tile:
            node = dataclasses.replace(anchor, attrs={**attrs, WINOGRAD_TILE: tile})
            variant = dataclasses.replace(group, nodes=(node, *group.nodes[1:]))
            found.append(Alternative(f"winograd{tile}", variant))
    return found


def choose(
    group: FusedGroup, graph: Graph, target: str | Target, lookup: TuningLookup | None
) -> tuple[Alternative, PrimFunc]:
    """The alternative of ``group`` whose stored best schedule for ``target`` ran
    fastest, and its function; by the default schedules' rule (see the module
    docstring) when none has a stored schedule."""
    options = [(option, option.group.prim_func(graph)) for option in alternatives(group, graph)]
    if len(options) == 1:
        return options[0]
    timed = []
    if lookup is not None:
        timed = [
            (compared_seconds(seconds, direct=option.algorithm == DIRECT), k)
            for k, (option, func) in enumerate(options)
            if (seconds := best_seconds(func, target, lookup)) is not None
        ]
    if timed:
        return options[min(timed)[1]]
    out_height, out_width = graph.types[group.anchor.output].shape[2:4]
    if group.anchor.op != BLOCKED and max(out_height, out_width) <= DEFAULT_WINOGRAD_MAX_SIZE:
        return next(option for option in options if option[0].algorithm == "winograd2")
    return options[0]


def compared_seconds(seconds: float, *, direct: bool) -> float:
    """The time a choice between a group's algorithms compares for one whose best
    stored time is ``seconds``: a Winograd form's counts as ``seconds / WINOGRAD_EDGE``."""
    return seconds if direct else seconds / WINOGRAD_EDGE
