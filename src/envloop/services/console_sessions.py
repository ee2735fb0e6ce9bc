"""Console login sessions, kept server-side: the browser's cookie holds an opaque random token,
never the API key it was opened with, and the store holds only the token's hash.

A session ends when it expires (`SESSION_TTL`), when its user logs out, and when its API key is
revoked (checked on every request, like the key itself). Forms carry a CSRF token derived from the
session token, so a page of another site, which can make the browser send the cookie but cannot
read the page, cannot act for the user.
"""

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete, select

from envloop.services.keys import hash_secret
from envloop.store.db import Store
from envloop.store.tables import ApiKey, ConsoleSession

SESSION_TTL = timedelta(days=7)
SESSION_PREFIX = "els_"


@dataclass(frozen=True)
class SessionGrant:
    project_id: str
    csrf: str
    """The token this session's forms must carry."""


def csrf_token(session_token: str) -> str:
    return hmac.new(session_token.encode(), b"envloop-console-csrf", hashlib.sha256).hexdigest()


def open_session(store: Store, api_key_id: str) -> str:
    """A new session of the key `api_key_id` (the caller has authenticated it); its cookie token.
    Expired sessions are swept on the way."""
    token = f"{SESSION_PREFIX}{secrets.token_urlsafe(32)}"
    now = datetime.now(UTC)
    with store.write() as session:
        session.execute(delete(ConsoleSession).where(ConsoleSession.expires_at < now))
        session.add(
            ConsoleSession(
                token_hash=hash_secret(token),
                api_key_id=api_key_id,
                created_at=now,
                expires_at=now + SESSION_TTL,
            )
        )
    return token


def resolve_session(store: Store, token: str) -> SessionGrant | None:
    """The project a cookie's session is for, or None when it is unknown, expired, or its key revoked."""
    if not token.startswith(SESSION_PREFIX):
        return None
    with store.read() as session:
        row = session.execute(
            select(ApiKey.project_id, ApiKey.revoked_at, ConsoleSession.expires_at)
            .join(ApiKey, ApiKey.id == ConsoleSession.api_key_id)
            .where(ConsoleSession.token_hash == hash_secret(token))
        ).first()
    if row is None or row.revoked_at is not None or row.expires_at <= datetime.now(UTC):
        return None
    return SessionGrant(project_id=str(row.project_id), csrf=csrf_token(token))


def end_session(store: Store, token: str) -> None:
    with store.write() as session:
        session.execute(delete(ConsoleSession).where(ConsoleSession.token_hash == hash_secret(token)))
