"""The tuning service: an HTTP API over the tuning database (FastAPI, served by
uvicorn with ``tensortune serve``), versioned under ``/v1``, its OpenAPI schema at
``/openapi.json``."""

from tuner.service.app import create_app

__all__ = ["create_app"]
