"""A token whose secret a deployment hands in (``ensure_token``): registered once,
however often and however concurrently it is asked for, and refused when the secret
is guessable or already another token's; on SQLite and PostgreSQL."""

from __future__ import annotations

import secrets
import threading

import pytest

from db import RecordError, Role, SQLDatabase
from db.tokens import SECRET_PREFIX


def a_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def test_a_secret_handed_in_becomes_a_working_token(database):
    secret = a_secret()
    token, registered = database.ensure_token("admin", Role.ADMIN, secret)
    assert registered and (token.name, token.role, token.quota) == ("admin", Role.ADMIN, None)
    assert database.token_for_secret(secret) == token


def test_a_second_call_adds_nothing(database):
    secret = a_secret()
    first, _ = database.ensure_token("admin", Role.ADMIN, secret)
    again, registered = database.ensure_token("admin", Role.ADMIN, secret)
    assert not registered and again == first
    assert database.tokens() == [first]


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


@pytest.mark.parametrize("secret", ["", "tt_short", "x" * 31, "tt_" + "x" * 20 + " " + "x" * 20])
def test_a_guessable_or_unsendable_secret_is_refused_saying_how_to_make_one(database, secret):
    with pytest.raises(RecordError, match=r"32 characters or more.*secrets\.token_urlsafe\(32\)"):
        database.ensure_token("admin", Role.ADMIN, secret)
    assert database.tokens() == []


def test_the_secret_of_a_revoked_token_stays_revoked(database):
    secret = a_secret()
    token, _ = database.ensure_token("admin", Role.ADMIN, secret)
    database.revoke_token(token.id)
    with pytest.raises(RecordError, match=f"token {token.id} 'admin', revoked"):
        database.ensure_token("admin", Role.ADMIN, secret)
    assert database.token_for_secret(secret) is None


def test_the_secret_of_a_token_of_another_role_is_refused(database):
    secret = a_secret()
    database.ensure_token("reader", Role.READ, secret)
    with pytest.raises(RecordError, match="of the role 'read', not 'admin'"):
        database.ensure_token("admin", Role.ADMIN, secret)
