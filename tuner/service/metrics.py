"""``GET /metrics`` in the Prometheus text format (prometheus_client): jobs by status,
records by outcome (the trials measured, and the failures by kind) read from the
database when scraped, so every coordinator's work counts wherever it ran; and the
latency of this server's requests, per route."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator

from fastapi import FastAPI, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

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

    @app.middleware("http")
    async def timed(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        start = time.perf_counter()
        response = await call_next(request)
        route = request.scope.get("route")
        path = getattr(route, "path", "unmatched")
        latency.labels(path, request.method).observe(time.perf_counter() - start)
        return response

    @app.get("/metrics", include_in_schema=False)
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
