"""Share links: a token that reads one job (its pages and API reads) and nothing else.

The token is stored hashed like an API key; it can carry an expiry and be revoked. What a token may
reach is decided where requests are authenticated: the job it names, read-only.
"""

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from envloop.core.ids import new_id
from envloop.errors import NotFoundError, UserError
from envloop.services.context import Context
from envloop.services.jobs import load_job
from envloop.services.keys import hash_secret
from envloop.store.db import Store
from envloop.store.tables import ShareLink
from envloop.wire.access import MAX_EXPIRY, CreatedShare, ShareView

# The models this module returns are defined in envloop.wire (light to import) and re-exported here.
__all__ = ["CreatedShare", "ShareView"]

SHARE_PREFIX = "els_"


@dataclass(frozen=True)
class ShareGrant:
    project_id: str
    job_id: str


def _active(row: ShareLink, now: datetime) -> bool:
    return row.revoked_at is None and (row.expires_at is None or row.expires_at > now)


def _view(row: ShareLink) -> ShareView:
    return ShareView(
        id=row.id,
        job_id=row.job_id,
        created_at=row.created_at,
        expires_at=row.expires_at,
        revoked_at=row.revoked_at,
        active=_active(row, datetime.now(UTC)),
    )


def create_share(ctx: Context, job_id: str, expires_in_sec: float | None = None) -> CreatedShare:
    """A new read-only token for one job, valid until revoked or for `expires_in_sec` seconds."""
    if expires_in_sec is not None and not 0 < expires_in_sec <= MAX_EXPIRY.total_seconds():
        raise UserError(f"expires_in_sec must be between 0 and {int(MAX_EXPIRY.total_seconds())}")
    now = datetime.now(UTC)
    token = f"{SHARE_PREFIX}{secrets.token_urlsafe(32)}"
    with ctx.store.write() as session:
        load_job(session, ctx.project_id, job_id)
        row = ShareLink(
            id=new_id("shr"),
            project_id=ctx.project_id,
            job_id=job_id,
            token_hash=hash_secret(token),
            public=False,
            created_at=now,
            expires_at=None if expires_in_sec is None else now + timedelta(seconds=expires_in_sec),
        )
        session.add(row)
        session.flush()
        view = _view(row)
    return CreatedShare(**view.model_dump(), token=token, path=f"/share/{token}")


def list_shares(ctx: Context, job_id: str) -> list[ShareView]:
    with ctx.store.read() as session:
        load_job(session, ctx.project_id, job_id)
        rows = session.scalars(
            select(ShareLink).where(ShareLink.job_id == job_id).order_by(ShareLink.created_at, ShareLink.id)
        )
        return [_view(row) for row in rows]


def revoke_share(ctx: Context, share_id: str) -> ShareView:
    """The token stops working at once; revoking twice keeps the first time."""
    with ctx.store.write() as session:
        row = session.get(ShareLink, share_id)
        if row is None or row.project_id != ctx.project_id:
            raise NotFoundError(f"unknown share link {share_id!r}")
        if row.revoked_at is None:
            row.revoked_at = datetime.now(UTC)
        session.flush()
        return _view(row)


def resolve_share(store: Store, token: str) -> ShareGrant | None:
    """The job a presented token may read, or None when it is unknown, expired or revoked."""
    if not token.startswith(SHARE_PREFIX):
        return None
    with store.read() as session:
        row = session.scalar(select(ShareLink).where(ShareLink.token_hash == hash_secret(token)))
    if row is None or not _active(row, datetime.now(UTC)):
        return None
    return ShareGrant(project_id=row.project_id, job_id=row.job_id)
