"""A tuning task: one workload on one target, with what a tuner reports against.

``workload_key`` and ``target`` (canonical, ``"llvm -mcpu=znver3"``) are what the
database stores records under and what ``compiler.build(..., database=...)``
looks them up by, so a task is built through ``from_func`` or ``from_spec``,
which compute both the same way the build does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from compiler.ir.function import PrimFunc
from compiler.target.parse import Target, canonical_target
from compiler.workload.flops import flop_count
from compiler.workload.key import workload_key
from compiler.workload.spec import normalize_spec, workload_from_normalized_spec


@dataclass(frozen=True)
class TuneTask:
    """``func`` is the unscheduled workload; ``spec`` the operator spec it came from
    (canonical JSON text), when it came from one, so results can be checked
    against numpy; ``flop_count`` turns seconds into FLOP/s."""

    func: PrimFunc
    workload_key: str
    target: str
    flop_count: int
    spec: str | None = None

    @staticmethod
    def from_func(
        func: PrimFunc, target: str | Target = "llvm", spec: Mapping[str, Any] | None = None
    ) -> TuneTask:
        normalized = None if spec is None else normalize_spec(spec)
        return TuneTask._of(func, target, normalized)

    @staticmethod
    def from_spec(spec: Mapping[str, Any], target: str | Target = "llvm") -> TuneTask:
        """The task of an operator spec (``{"op": "matmul", "args": {...}}``); raises
        WorkloadError for a malformed spec. The spec is normalized here, once: the
        task holds it normalized and nothing downstream checks it again."""
        normalized = normalize_spec(spec)
        return TuneTask._of(workload_from_normalized_spec(normalized), target, normalized)

    @staticmethod
    def _of(func: PrimFunc, target: str | Target, normalized: Mapping[str, Any] | None) -> TuneTask:
        spec_text = None if normalized is None else json.dumps(normalized, sort_keys=True)
        return TuneTask(
            func, workload_key(func), canonical_target(target), flop_count(func), spec_text
        )

    def gflops(self, seconds: float) -> float:
        return self.flop_count / seconds / 1e9

    @property
    def name(self) -> str:
        """A name for people: the op and its arguments (``matmul k=64 m=64 n=64``), or
        "workload" for a func that came from no spec."""
        if self.spec is None:
            return "workload"
        spec = json.loads(self.spec)
        args = " ".join(f"{k}={json.dumps(v)}" for k, v in spec.get("args", {}).items())
        return f"{spec['op']} {args}".strip()[:200]

    def __repr__(self) -> str:
        """Short enough for a progress line: the target by its CPU, not its features."""
        name = json.loads(self.spec)["op"] if self.spec else "workload"
        machine = " ".join(t for t in self.target.split() if not t.startswith("-mattr"))
        return f"TuneTask({name} {self.workload_key[:12]}, {machine!r})"
