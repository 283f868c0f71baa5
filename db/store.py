"""``TuningStore``: everything the tuning service keeps, in one database.

The service, its coordinator and the command line each ask for the narrowest of
``Database`` (records and workloads), ``JobStore``, ``JobQueue``, ``TokenStore``,
``ModelStore`` and ``History`` that does; what needs several of them at once (a route
table, a coordinator) takes a ``TuningStore``. ``SQLDatabase`` and ``MemoryDatabase``
are both one.
"""

from __future__ import annotations

from db.base import Database
from db.history import History
from db.jobs import JobQueue, JobStore
from db.model_files import ModelStore
from db.tokens import TokenStore


class TuningStore(Database, JobStore, JobQueue, TokenStore, ModelStore, History):
    """Records and workloads, jobs, API tokens, model files and the history views.

    ``url`` is where another process opens this same store (the service reads each
    model file in a process of its own); None when only this process can."""

    url: str | None
