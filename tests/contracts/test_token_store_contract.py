"""The contract of ``db.TokenStore``, over every implementation: a token made here
shows its secret once and is found by it until revoked; a token whose secret a
deployment hands in (``ensure_token``) is registered once, however often it is asked
for, and refused when the secret is guessable or already another token's."""

from __future__ import annotations

import secrets

import pytest

from db import RecordError, Role
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


def test_a_token_made_here_works_until_it_is_revoked(database):
    reader, reader_secret = database.create_token("dashboard", Role.READ)
    ci, ci_secret = database.create_token("ci", Role.SUBMIT, quota=2, upload_limit=1 << 20)
    assert (reader.id, ci.id) == (1, 2)
    assert reader_secret.startswith(SECRET_PREFIX) and reader_secret != ci_secret
    assert (ci.name, ci.role, ci.quota, ci.upload_limit) == ("ci", Role.SUBMIT, 2, 1 << 20)
    assert ci.revoked_at is None and ci.created_at.tzinfo is not None
    assert database.token_for_secret(ci_secret) == ci
    assert database.token_for_secret(a_secret()) is None
    revoked = database.revoke_token(ci.id)
    assert revoked.id == ci.id and revoked.revoked_at is not None
    assert database.revoke_token(ci.id) == revoked  # revoking again changes nothing
    assert database.token_for_secret(ci_secret) is None
    assert database.token_for_secret(reader_secret) == reader
    assert database.tokens() == [reader, revoked]
    with pytest.raises(RecordError, match="no token with id 7"):
        database.revoke_token(7)


@pytest.mark.parametrize(
    "name, options, message",
    [
        ("", {}, "token name: give 1 to 128 characters, got 0"),
        ("x" * 129, {}, "token name: give 1 to 128 characters, got 129"),
        ("ci", {"quota": -1}, "token quota: must be a non-negative integer"),
        ("ci", {"upload_limit": 0}, "token upload limit: must be a positive integer"),
    ],
)
def test_a_bad_token_is_refused_and_nothing_is_stored(database, name, options, message):
    with pytest.raises(RecordError, match=message):
        database.create_token(name, Role.SUBMIT, **options)
    assert database.tokens() == []
