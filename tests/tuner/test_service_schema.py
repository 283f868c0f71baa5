"""The API against its own OpenAPI schema, by schemathesis: requests generated from
the schema (valid ones and broken ones) sent to a real server over a real database
with stored records, and every answer checked: never a server error (5xx), always
the status codes, content types and bodies the schema documents."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from db_helpers import MATMUL, ZEN, split_trace
from hypothesis import HealthCheck, settings
from schemathesis.checks import positive_data_acceptance
from service_server import serving

from db import Measurement, Role, SQLDatabase
from tuner.service import create_app

# The event stream of a running job never ends by itself; its own tests follow it.
EVENTS = "/v1/jobs/{job_id}/events"
# The admin token's secret, registered by the fixture that starts the server. It is known
# before then: schemathesis asks for it already when it collects the test.
ADMIN_SECRET = "tt_" + secrets.token_urlsafe(32)


@schemathesis.auth()
class AdminToken:
    """The token schemathesis sends, so that it also knows when it sends none (a case
    testing the refusal of a request without one)."""

    def get(self, case: schemathesis.Case, context: schemathesis.AuthContext) -> str:
        return ADMIN_SECRET

    def set(self, case: schemathesis.Case, data: str, context: schemathesis.AuthContext) -> None:
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server over a database holding a tuned workload; its URL."""
    path = Path(tmp_path_factory.mktemp("schema")) / "tune.db"
    with SQLDatabase(f"sqlite:///{path}") as database:
        entry = database.commit_workload(MATMUL, flop_count=2 * 33 * 17 * 9)
        database.commit_records(
            Measurement.ok(entry.key, ZEN, split_trace(f), [f * 1e-4]) for f in (3, 5, 11)
        )
        database.ensure_token("schema", Role.ADMIN, ADMIN_SECRET)
        with serving(create_app(database)) as url:
            yield url


def _documented_schema() -> schemathesis.BaseSchema:
    """The schema the application documents, read from an application over an empty
    database at collection time. (Schemathesis's lazy loader, ``from_fixture``, sets a
    private attribute of pytest's test items that pytest 9.2 no longer has.)"""
    with SQLDatabase("sqlite://") as empty:
        document = create_app(empty).openapi()
    return schemathesis.openapi.from_dict(document).exclude(path=EVENTS)


schema = _documented_schema()


def _answers_as_documented(case: schemathesis.Case, url: str) -> None:
    case.call_and_validate(
        base_url=url,
        # a spec may fit the schema and still name no operator the library has
        excluded_checks=[positive_data_acceptance],
    )


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_api_answers_as_its_schema_says(case, served) -> None:
    _answers_as_documented(case, served)


@pytest.mark.slow
@schema.parametrize()
@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_api_answers_as_its_schema_says_at_length(case, served) -> None:
    _answers_as_documented(case, served)
