"""``GET /metrics`` in the Prometheus text format (prometheus_client): jobs by status,
records by outcome (the trials measured, and the failures by kind) read from the
database when scraped, so every coordinator's work counts wherever it ran; and the
latency of this server's requests, per route."""

from __future__ import annotations

import time
from collections.abc import Iterator

from fastapi import FastAPI, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Receive, Scope, Send

from compiler.errors import ErrorKind
from db import SQLDatabase


class DatabaseCollector(Collector):
    """Counts read from the database at each scrape."""

    def __init__(self, database: SQLDatabase) -> None:
        self.database = database

    def collect(self) -> Iterator[Metric]:
        jobs = GaugeMetricFamily(
            "tensortune_jobs", "Jobs in the database by status", labels=["status"]
        )
        for status, count in self.database.job_counts().items():
            jobs.add_metric([status.value], count)
        yield jobs
        records = GaugeMetricFamily(
            "tensortune_records",
            "Measurements in the database by outcome (ok, or the kind of failure)",
            labels=["outcome"],
        )
        records.add_metric(["ok"], self.database.count(ok=True))
        for kind in ErrorKind:
            records.add_metric([kind.value], self.database.count(error_kind=kind))
        yield records


class _Timed:
    """Times each HTTP request into ``latency`` by its route's path (an ASGI middleware
    of its own: Starlette's ``BaseHTTPMiddleware`` costs more than the routes it times)."""

    def __init__(self, app: ASGIApp, latency: Histogram) -> None:
        self.app = app
        self.latency = latency

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        try:
            await self.app(scope, receive, send)
        finally:
            path = getattr(scope.get("route"), "path", "unmatched")
            self.latency.labels(path, scope["method"]).observe(time.perf_counter() - start)


def add_metrics(app: FastAPI, database: SQLDatabase) -> None:
    """Serve ``/metrics`` and time every request of ``app``."""
    registry = CollectorRegistry()
    registry.register(DatabaseCollector(database))
    latency = Histogram(
        "tensortune_request_seconds",
        "Time to answer a request, by route and method",
        ["route", "method"],
        registry=registry,
    )

    app.add_middleware(_Timed, latency=latency)

    @app.get("/metrics", include_in_schema=False)
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
