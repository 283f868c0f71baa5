"""``GET /metrics`` in the Prometheus text format (prometheus_client): jobs by status,
records by outcome (the trials measured, and the failures by kind) read from the
database, so every coordinator's work counts wherever it ran; and the latency of this
server's requests, per route.

The counts are two grouped queries, read at most every ``COUNTS_FRESH_SECONDS``
however often the page is scraped: they were nine queries at every scrape, each a
scan of the records. With ``token`` the page answers only a live API token's
bearer (any role); without, anyone who reaches the server."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

from fastapi import FastAPI, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Receive, Scope, Send

from db import JobStatus, TuningStore
from tuner.service.memo import RecentMemo

# How long the database's counts are served again before they are read anew.
COUNTS_FRESH_SECONDS = 5.0


class DatabaseCollector(Collector):
    """Counts read from the database, at most every ``COUNTS_FRESH_SECONDS``."""

    def __init__(self, database: TuningStore) -> None:
        self.database = database
        self._counts: RecentMemo[str, tuple[dict[JobStatus, int], dict[str, int]]] = RecentMemo(
            COUNTS_FRESH_SECONDS
        )

    def collect(self) -> Iterator[Metric]:
        job_counts, record_counts = self._counts.get(
            "counts", lambda: (self.database.job_counts(), self.database.record_counts())
        )
        jobs = GaugeMetricFamily(
            "tensortune_jobs", "Jobs in the database by status", labels=["status"]
        )
        for status, count in job_counts.items():
            jobs.add_metric([status.value], count)
        yield jobs
        records = GaugeMetricFamily(
            "tensortune_records",
            "Measurements in the database by outcome (ok, or the kind of failure)",
            labels=["outcome"],
        )
        for outcome, count in record_counts.items():
            records.add_metric([outcome], count)
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


def add_metrics(app: FastAPI, database: TuningStore, dependencies: Sequence[Any]) -> None:
    """Serve ``/metrics`` (after ``dependencies``: the token check, if any) and time
    every request of ``app``."""
    registry = CollectorRegistry()
    registry.register(DatabaseCollector(database))
    latency = Histogram(
        "tensortune_request_seconds",
        "Time to answer a request, by route and method",
        ["route", "method"],
        registry=registry,
    )

    app.add_middleware(_Timed, latency=latency)

    @app.get("/metrics", include_in_schema=False, dependencies=list(dependencies))
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
