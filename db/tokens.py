"""API tokens of the tuning service. A token is a random secret handed out once; the
database keeps only its SHA-256 digest, so a copy of the database gives no one a
token. Each has a role (``read`` < ``submit`` < ``admin``) and, optionally, a quota:
how many of its jobs may be unfinished (queued or running) at once. ``TokenStore``
is what the service and the command line ask of the tokens; the functions below are
``SQLDatabase``'s implementation.
"""

from __future__ import annotations

import abc
import enum
import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, Engine, Row, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from db.errors import QuotaError, RecordError
from db.models import JobRow, TokenRow
from db.queries import as_utc, now
from db.record import JobStatus

SECRET_PREFIX = "tt_"
# The shortest secret ``ensure_token`` takes: 32 URL-safe characters carry 192 random
# bits, past guessing (``create_token`` makes 46).
MIN_SECRET_LENGTH = 32
MAKE_SECRET = "python3 -c 'import secrets; print(\"tt_\" + secrets.token_urlsafe(32))'"
UNFINISHED = (JobStatus.QUEUED.value, JobStatus.RUNNING.value)


class Role(enum.Enum):
    READ = "read"
    SUBMIT = "submit"
    ADMIN = "admin"

    def allows(self, needed: Role) -> bool:
        order = list(Role)
        return order.index(self) >= order.index(needed)


@dataclass(frozen=True)
class ApiToken:
    id: int
    name: str
    role: Role
    quota: int | None
    created_at: datetime
    revoked_at: datetime | None
    upload_limit: int | None = None  # the largest model file it may upload, in bytes


class TokenStore(abc.ABC):
    @abc.abstractmethod
    def create_token(
        self, name: str, role: Role, *, quota: int | None = None, upload_limit: int | None = None
    ) -> tuple[ApiToken, str]:
        """A new token and its secret, which is shown this once: only its digest is kept.
        ``quota``: the most unfinished jobs it may have; ``upload_limit``: the largest
        model file it may upload, in bytes (None: no limit of its own)."""

    @abc.abstractmethod
    def ensure_token(self, name: str, role: Role, secret: str) -> tuple[ApiToken, bool]:
        """The live token of a secret made elsewhere (a deployment's), registered now
        when there is none, and whether it was; safe to repeat and to race. The secret
        of a revoked token, or of a token of another role, is refused (RecordError)."""

    @abc.abstractmethod
    def tokens(self) -> list[ApiToken]:
        """Every token, revoked ones too, oldest first."""

    @abc.abstractmethod
    def revoke_token(self, token_id: int) -> ApiToken:
        """The token, revoked (now, or when it was before); RecordError when there is
        none."""

    @abc.abstractmethod
    def token_for_secret(self, secret: str) -> ApiToken | None:
        """The live token whose secret this is, or None (unknown or revoked)."""


def digest_of(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def create_token(
    engine: Engine, name: str, role: Role, quota: int | None, upload_limit: int | None = None
) -> tuple[ApiToken, str]:
    """A new token and its secret (shown once: only its digest is stored)."""
    check_token(name, quota, upload_limit)
    secret = new_secret()
    with engine.begin() as connection:
        token_id = connection.execute(
            insert(TokenRow)
            .values(
                name=name,
                digest=digest_of(secret),
                role=Role(role).value,
                quota=quota,
                upload_limit=upload_limit,
                created_at=now(),
            )
            .returning(TokenRow.id)
        ).scalar_one()
    return _token(engine, token_id), secret


def ensure_token(engine: Engine, name: str, role: Role, secret: str) -> tuple[ApiToken, bool]:
    """The live token of ``secret``, registered now with ``name`` and ``role`` when there
    is none, and whether it was: a deployment hands its first admin secret in (a file
    its operator made) instead of reading one from ``create_token``, and may do so at
    every start. The digest column is unique, so of two calls racing to register one
    secret, one inserts and the other's insert fails: it then finds the first one's
    token. A secret of a revoked token, or of a token of another role, is refused."""
    _check_name(name)
    check_secret(secret)
    role = Role(role)
    digest = digest_of(secret)
    registered = False
    if _with_digest(engine, digest) is None:
        registered = _insert_unless_taken(engine, name, role, digest)
    token = _with_digest(engine, digest)
    assert token is not None, "the digest is stored: this call or a racing one inserted it"
    check_handed_in(token, role)
    return token, registered


def check_token(name: str, quota: int | None, upload_limit: int | None) -> None:
    _check_name(name)
    if quota is not None and (type(quota) is not int or quota < 0):
        raise RecordError(f"token quota: must be a non-negative integer, got {quota!r}")
    if upload_limit is not None and (type(upload_limit) is not int or upload_limit < 1):
        raise RecordError(f"token upload limit: must be a positive integer, got {upload_limit!r}")


def new_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def check_handed_in(token: ApiToken, role: Role) -> None:
    """Refuse a handed-in secret that is a revoked token's, or a token's of another
    role."""
    if token.revoked_at is not None:
        raise RecordError(
            f"the secret given is that of token {token.id} {token.name!r}, revoked: a revoked "
            f"token stays revoked; make a new secret with {MAKE_SECRET}"
        )
    if token.role is not role:
        raise RecordError(
            f"the secret given is that of token {token.id} {token.name!r}, of the role "
            f"{token.role.value!r}, not {role.value!r}; make a new secret with {MAKE_SECRET}"
        )


def check_secret(secret: str) -> None:
    """Refuse a secret handed in that is short enough to guess, or that an HTTP
    ``Authorization: Bearer`` header cannot carry (white space)."""
    if len(secret) < MIN_SECRET_LENGTH or any(c.isspace() for c in secret):
        raise RecordError(
            f"a token secret needs {MIN_SECRET_LENGTH} characters or more and no white "
            f"space, got {len(secret)} characters; make one with {MAKE_SECRET}"
        )


def tokens(engine: Engine) -> list[ApiToken]:
    with engine.connect() as connection:
        rows = connection.execute(select(TokenRow.__table__).order_by(TokenRow.id))
        return [_from_row(row) for row in rows]


def revoke_token(engine: Engine, token_id: int) -> ApiToken:
    with engine.begin() as connection:
        connection.execute(
            update(TokenRow)
            .where(TokenRow.id == token_id, TokenRow.revoked_at.is_(None))
            .values(revoked_at=now())
        )
    return _token(engine, token_id)


def token_for_secret(engine: Engine, secret: str) -> ApiToken | None:
    """The live (not revoked) token of ``secret``, or None."""
    with engine.connect() as connection:
        row = connection.execute(
            select(TokenRow.__table__).where(
                TokenRow.digest == digest_of(secret), TokenRow.revoked_at.is_(None)
            )
        ).first()
    return None if row is None else _from_row(row)


def check_quota(connection: Connection, token_id: int) -> None:
    """Raise QuotaError when the token's unfinished jobs fill its quota; called in the
    transaction that stores a new job, before it does. The token's row is locked first
    (``FOR UPDATE`` on PostgreSQL; a SQLite write transaction holds the whole file), so
    the submissions of one token are counted one after the other: counted in a
    transaction of its own, 10 concurrent submissions under a quota of 1 stored 8 jobs."""
    token = connection.execute(
        select(TokenRow.name, TokenRow.quota).where(TokenRow.id == token_id).with_for_update()
    ).one_or_none()
    if token is None:
        raise RecordError(f"token {token_id}: no such token")
    if token.quota is None:
        return
    unfinished = connection.execute(
        select(func.count())
        .select_from(JobRow)
        .where(JobRow.token_id == token_id, JobRow.status.in_(UNFINISHED))
    ).scalar_one()
    refuse_over_quota(token.name, token.quota, unfinished)


def refuse_over_quota(name: str, quota: int | None, unfinished: int) -> None:
    """QuotaError when a token of ``quota`` already has ``unfinished`` jobs."""
    if quota is not None and unfinished >= quota:
        raise QuotaError(
            f"token {name!r} has {quota} unfinished jobs, its quota; wait for one "
            "to end or cancel one"
        )


def _check_name(name: str) -> None:
    if not name or len(name) > 128:
        raise RecordError(f"token name: give 1 to 128 characters, got {len(name)}")


def _with_digest(engine: Engine, digest: str) -> ApiToken | None:
    """The token of ``digest``, revoked or not."""
    with engine.connect() as connection:
        row = connection.execute(
            select(TokenRow.__table__).where(TokenRow.digest == digest)
        ).first()
    return None if row is None else _from_row(row)


def _insert_unless_taken(engine: Engine, name: str, role: Role, digest: str) -> bool:
    """Insert a token of ``digest``; False when a racing call inserted it first."""
    try:
        with engine.begin() as connection:
            connection.execute(
                insert(TokenRow).values(name=name, digest=digest, role=role.value, created_at=now())
            )
    except IntegrityError:
        return False
    return True


def _token(engine: Engine, token_id: int) -> ApiToken:
    with engine.connect() as connection:
        row = connection.execute(select(TokenRow.__table__).where(TokenRow.id == token_id)).first()
    if row is None:
        raise RecordError(f"no token with id {token_id!r}")
    return _from_row(row)


def _from_row(row: Row) -> ApiToken:
    return ApiToken(
        id=row.id,
        name=row.name,
        role=Role(row.role),
        quota=row.quota,
        created_at=as_utc(row.created_at),
        revoked_at=None if row.revoked_at is None else as_utc(row.revoked_at),
        upload_limit=row.upload_limit,
    )
