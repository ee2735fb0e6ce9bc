"""Per-project API keys: created once (the key is shown only then), stored hashed, revocable.

A key is 256 random bits, so a plain sha256 of it is enough to make the stored hash useless to a
reader of the database; looking a key up by its hash also avoids comparing secrets in Python.
"""

import hashlib
import secrets
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from envloop.core.ids import new_id
from envloop.errors import NotFoundError, UserError
from envloop.services.context import Context
from envloop.services.refs import check_name
from envloop.store.db import Store
from envloop.store.reads import SessionReads, project_by_name
from envloop.store.tables import ApiKey, Project
from envloop.wire.access import ApiKeyView, CreatedKey

# The models this module returns are defined in envloop.wire (light to import) and re-exported here.
__all__ = ["ApiKeyView", "CreatedKey"]

KEY_PREFIX = "elk_"
_LAST_USED_RESOLUTION = timedelta(minutes=1)
"""`last_used_at` is refreshed at most this often, so reads do not turn every request into a write."""


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def ensure_project(store: Store, name: str) -> str:
    """The id of project `name`, created if it does not exist yet."""
    check_name("project", name)
    project_id = f"prj_{name}"
    with store.read() as session:
        found = SessionReads(session).first(project_by_name, name=name)
    if found is not None:
        return str(found.id)
    try:
        with store.write() as session:
            session.add(Project(id=project_id, name=name))
    except IntegrityError:
        pass  # created concurrently
    return project_id


def find_project(store: Store, name: str) -> str:
    with store.read() as session:
        found = SessionReads(session).first(project_by_name, name=name)
    if found is None:
        raise NotFoundError(f"unknown project {name!r}")
    return str(found.id)


def project_context(ctx: Context, project_id: str) -> Context:
    """The same installation seen from another project (a request authenticated for it)."""
    return replace(ctx, project_id=project_id)


def _project_name(store: Store, project_id: str) -> str:
    with store.read() as session:
        return session.scalar(select(Project.name).where(Project.id == project_id)) or project_id


def _view(row: ApiKey, project: str) -> ApiKeyView:
    return ApiKeyView(
        id=row.id,
        name=row.name,
        project=project,
        prefix=row.prefix,
        created_at=row.created_at,
        revoked_at=row.revoked_at,
        last_used_at=row.last_used_at,
    )


def create_key(ctx: Context, name: str | None = None, project: str | None = None) -> CreatedKey:
    """A new key for `project` (by name, created if new), else for the context's project."""
    label = (name or "default").strip()
    if not label or len(label) > 200:
        raise UserError("a key name must have 1 to 200 characters")
    project_id = ensure_project(ctx.store, project) if project is not None else ctx.project_id
    key_id = new_id("key")
    secret = f"{KEY_PREFIX}{secrets.token_urlsafe(32)}"
    row = ApiKey(
        id=key_id,
        project_id=project_id,
        name=label,
        prefix=secret[:12],
        key_hash=hash_secret(secret),
        created_at=datetime.now(UTC),
    )
    with ctx.store.write() as session:
        session.add(row)
    view = _view(row, _project_name(ctx.store, project_id))
    return CreatedKey(**view.model_dump(), key=secret)


def list_keys(ctx: Context) -> list[ApiKeyView]:
    """The project's keys, revoked ones included (never their secrets)."""
    project = _project_name(ctx.store, ctx.project_id)
    with ctx.store.read() as session:
        rows = session.scalars(
            select(ApiKey).where(ApiKey.project_id == ctx.project_id).order_by(ApiKey.created_at, ApiKey.id)
        )
        return [_view(row, project) for row in rows]


def revoke_key(ctx: Context, key_id: str) -> ApiKeyView:
    """From now on the key authenticates nothing; revoking twice keeps the first time."""
    project = _project_name(ctx.store, ctx.project_id)
    with ctx.store.write() as session:
        row = session.get(ApiKey, key_id)
        if row is None or row.project_id != ctx.project_id:
            raise NotFoundError(f"unknown API key {key_id!r}")
        if row.revoked_at is None:
            row.revoked_at = datetime.now(UTC)
        session.flush()
        return _view(row, project)


def authenticate_key(store: Store, secret: str) -> str | None:
    """The project a presented key belongs to, or None for an unknown or revoked key."""
    found = authenticated_key(store, secret)
    return None if found is None else found[1]


def authenticated_key(store: Store, secret: str) -> tuple[str, str] | None:
    """(key id, project id) of a presented key, or None for an unknown or revoked key."""
    if not secret.startswith(KEY_PREFIX):
        return None
    digest = hash_secret(secret)
    with store.read() as session:
        row = session.execute(
            select(ApiKey.id, ApiKey.project_id, ApiKey.revoked_at, ApiKey.last_used_at).where(
                ApiKey.key_hash == digest
            )
        ).first()
    if row is None or row.revoked_at is not None:
        return None
    now = datetime.now(UTC)
    if row.last_used_at is None or now - row.last_used_at > _LAST_USED_RESOLUTION:
        with store.write() as session:
            session.execute(update(ApiKey).where(ApiKey.id == row.id).values(last_used_at=now))
    return str(row.id), str(row.project_id)


def has_active_key(store: Store) -> bool:
    """Whether any project can authenticate at all (a server reachable from the network needs one)."""
    with store.read() as session:
        return session.scalar(select(ApiKey.id).where(ApiKey.revoked_at.is_(None)).limit(1)) is not None
