"""Bearer-token auth for the API: constant-time comparison against `EVOHARNESS_API_TOKEN`."""

from __future__ import annotations

import hmac

from fastapi import HTTPException, Request

TOKEN_ENV = "EVOHARNESS_API_TOKEN"
MIN_TOKEN_LENGTH = 16
UNAUTHORIZED = "missing or wrong bearer token (Authorization: Bearer $EVOHARNESS_API_TOKEN)"


def check_token(expected: str | None, header: str | None) -> bool:
    """True when ``header`` is ``Bearer <expected>`` (always True when auth is off: ``expected`` None)."""
    if expected is None:
        return True
    scheme, _, given = (header or "").partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), expected.encode())


def require_token(request: Request) -> None:
    """FastAPI dependency of every mutating endpoint: 401 without the right bearer token."""
    if not check_token(request.app.state.token, request.headers.get("authorization")):
        raise HTTPException(401, UNAUTHORIZED, headers={"WWW-Authenticate": "Bearer"})


def require_token_for_reads(request: Request) -> None:
    """Read endpoints: open unless `service.protect_reads` is set."""
    if request.app.state.settings.service.protect_reads:
        require_token(request)
