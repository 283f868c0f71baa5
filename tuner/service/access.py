"""Who may call what: each request names its API token (``Authorization: Bearer
<token>``), whose role must allow the route (``read`` < ``submit`` < ``admin``).
Reads may be left open (``anonymous_reads``); nothing that changes the database is."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import Depends, HTTPException
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from db import ApiToken, Role, SQLDatabase

bearer = HTTPBearer(auto_error=False, description="an API token: tensortune token create")
BEARER = Depends(bearer)


def caller(
    database: SQLDatabase, needed: Role, anonymous_reads: bool
) -> Callable[..., ApiToken | None]:
    """A FastAPI dependency that answers the calling token (None for an anonymous
    read), or 401 without a live token, 403 when its role is below ``needed``."""

    def authorized(
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
        token = database.token_for_secret(credentials.credentials)
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
