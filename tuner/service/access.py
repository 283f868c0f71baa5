"""Who may call what: each request names its API token (``Authorization: Bearer
<token>``), whose role must allow the route (``read`` < ``submit`` < ``admin``).
Reads may be left open (``anonymous_reads``); nothing that changes the database is.
A token found is trusted for TOKEN_FRESH_SECONDS without asking the database again,
so a revocation takes that long to reach a server that has just seen the token."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import Depends, HTTPException
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from db import ApiToken, Role, TokenStore
from tuner.service.memo import RecentMemo

bearer = HTTPBearer(auto_error=False, description="an API token: tensortune token create")
BEARER = Depends(bearer)
TOKEN_FRESH_SECONDS = 1.0


class TokenLookup:
    """The live token of a secret (None for one unknown or revoked), each found one
    kept for TOKEN_FRESH_SECONDS."""

    def __init__(self, database: TokenStore) -> None:
        self.database = database
        self._found: RecentMemo[str, ApiToken | None] = RecentMemo(TOKEN_FRESH_SECONDS)

    async def __call__(self, secret: str) -> ApiToken | None:
        """A token seen a moment ago at once, else from the database, in a thread."""
        return self._found.fresh(secret) or await run_in_threadpool(self._stored, secret)

    def _stored(self, secret: str) -> ApiToken | None:
        return self._found.get(
            secret,
            lambda: self.database.token_for_secret(secret),
            keep=lambda token: token is not None,
        )


def caller(
    lookup: TokenLookup, needed: Role, anonymous_reads: bool
) -> Callable[..., Awaitable[ApiToken | None]]:
    """A FastAPI dependency that answers the calling token (None for an anonymous
    read), or 401 without a live token (``lookup`` finds it), 403 when its role is
    below ``needed``. It runs on the event loop: a token seen a moment ago costs no
    thread."""

    async def authorized(
        credentials: HTTPAuthorizationCredentials | None = BEARER,
    ) -> ApiToken | None:
        if credentials is None:
            if needed is Role.READ and anonymous_reads:
                return None
            raise HTTPException(
                status_code=401,
                detail="no API token: send 'Authorization: Bearer <token>' "
                "(an admin makes one with: tensortune token create --role ROLE)",
                headers={"WWW-Authenticate": "Bearer"},
            )
        token = await lookup(credentials.credentials)
        if token is None:
            raise HTTPException(
                status_code=401,
                detail="the API token is unknown or revoked",
                headers={"WWW-Authenticate": "Bearer"},
            )
        if not token.role.allows(needed):
            raise HTTPException(
                status_code=403,
                detail=f"token {token.name!r} has the role {token.role.value!r}; this needs "
                f"{needed.value!r} or above",
            )
        return token

    return authorized
