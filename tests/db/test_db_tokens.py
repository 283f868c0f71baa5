"""Calls racing, from connections of their own, to register one secret a deployment
hands in leave one token, on SQLite and PostgreSQL (what every implementation does with
a secret is in ``tests/contracts/test_token_store_contract.py``)."""

from __future__ import annotations

import secrets
import threading

from db import Role, SQLDatabase
from db.tokens import SECRET_PREFIX


def a_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def test_calls_racing_to_register_one_secret_leave_one_token(database):
    secret = a_secret()
    start = threading.Barrier(8)
    outcomes = []

    def register() -> None:
        with SQLDatabase(database.url) as own:
            start.wait()
            outcomes.append(own.ensure_token("admin", Role.ADMIN, secret))

    threads = [threading.Thread(target=register) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(registered for _, registered in outcomes) == [False] * 7 + [True]
    assert len({token for token, _ in outcomes}) == 1
    assert len(database.tokens()) == 1
