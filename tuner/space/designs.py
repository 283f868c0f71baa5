"""What spaces built from design traces share: the domain of each sampling
instruction, read on the design, and a trace's skeleton (the trace without its
decisions), by which a space recognises the traces it made."""

from __future__ import annotations

import json
import math
from typing import Any

from compiler.ir.function import PrimFunc
from compiler.ir.stmt import Block
from compiler.schedule import Schedule, Trace
from compiler.schedule.handles import BlockRV
from compiler.schedule.primitives.compute_location import compute_location_choices
from compiler.schedule.primitives.sampling import perfect_tile_choices
from tuner.space.base import Domain


def sampling_domain(func: PrimFunc, design: Trace, index: int, role: str = "") -> Domain:
    """The decisions sampling instruction ``index`` of ``design`` (a trace of ``func``)
    may take: every perfect tiling of the loop it tiles, every categorical candidate
    with a weight above 0, every legal compute location on the design replayed up to
    it."""
    inst = design.instructions[index]
    if inst.kind == "sample_perfect_tile":
        extent = math.prod(inst.decision)
        tiles = perfect_tile_choices(extent, inst.inputs["n"], inst.inputs["max_innermost_factor"])
        return Domain(inst.kind, tuple(tiles), role=role)
    if inst.kind == "sample_categorical":
        allowed = tuple(k for k, p in enumerate(inst.inputs["probs"]) if p > 0)
        return Domain(inst.kind, allowed, tuple(inst.inputs["candidates"]), role=role)
    sch = Schedule(func)
    Trace(design.instructions[: index + 1]).apply_to_schedule(sch)
    return compute_location_domain(sch, sch.trace.instructions[index].inputs["block"], role)


def compute_location_domain(sch: Schedule, block: BlockRV, role: str = "") -> Domain:
    """Every legal compute location of ``block`` in ``sch`` (the design replayed up to
    the instruction that samples it)."""
    stmt = sch.get(block)
    assert isinstance(stmt, Block)
    locations = compute_location_choices(sch.mod[block.func_name], stmt)
    return Domain("sample_compute_location", tuple(locations), role=role)


def skeleton(trace: Trace) -> str:
    """The trace without its decisions: equal for every candidate of one design. A
    compute location's variable is named by what it stands for (``root10``,
    ``l10``, ``inl10``), which a decision changes, so variables keep only their
    number here."""
    document: dict[str, Any] = trace.as_json()
    for inst in document["instructions"]:
        inst.pop("decision", None)
        inst["outputs"] = [_rv_number(name) for name in inst["outputs"]]
        inst["inputs"] = _numbered(inst["inputs"])
    return json.dumps(document, sort_keys=True)


def _rv_number(name: str) -> str:
    return name.lstrip("abcdefghijklmnopqrstuvwxyz")


def _numbered(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"rv"}:
            return {"rv": _rv_number(value["rv"])}
        return {k: _numbered(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_numbered(v) for v in value]
    return value
