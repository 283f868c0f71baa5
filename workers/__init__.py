"""Workers: build candidates into shared libraries and check and time them, on this
machine (``create("local")``, the default) or on a Ray cluster (``create("ray")``).

Everything in and out is plain data (``Candidate``, ``BuildResult``, ``RunResult``);
``tuner.measurement.to_measurement`` turns a result into a database record.
"""

from __future__ import annotations

from typing import Any

from workers.base import (
    Artifact,
    Builder,
    BuildResult,
    Candidate,
    ErrorKind,
    MeasureConfig,
    Runner,
    RunResult,
    Workers,
    WorkersError,
)

KINDS = ("local", "ray")


def create(kind: str = "local", **options: Any) -> Workers:
    """Workers of ``kind``, one of ``KINDS``; ``options`` are the keyword arguments of
    ``workers.local.create_local`` or ``workers.ray_backend.create_ray``. Ray is
    imported only when asked for."""
    if kind == "local":
        from workers.local import create_local

        return create_local(**options)
    if kind == "ray":
        from workers.ray_backend import create_ray

        return create_ray(**options)
    raise WorkersError(f"unknown workers kind {kind!r}; the kinds are {', '.join(KINDS)}")


__all__ = [
    "KINDS",
    "Artifact",
    "BuildResult",
    "Builder",
    "Candidate",
    "ErrorKind",
    "MeasureConfig",
    "RunResult",
    "Runner",
    "Workers",
    "WorkersError",
    "create",
]
