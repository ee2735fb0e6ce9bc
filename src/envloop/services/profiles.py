"""Profiles: versioned, immutable model/agent params; secret values stored apart and never shown."""

import hashlib
import json

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from envloop.core.ids import new_id
from envloop.errors import ConflictError, NotFoundError, UserError
from envloop.services.context import Context
from envloop.services.refs import check_name, check_version, split_ref
from envloop.store.secrets import keyring, secret_values
from envloop.store.tables import Profile, ProfileSecret
from envloop.wire.profiles import PROFILE_SCHEMA, ProfileDocument, ProfileSpec, ProfileView, read_profile_file

# The models this module returns, and the reading of a profile file, are defined in envloop.wire
# (light to import: a remote `el profile create` reads the file without the store) and
# re-exported here.
__all__ = ["PROFILE_SCHEMA", "ProfileDocument", "ProfileSpec", "ProfileView", "read_profile_file"]

MASK = "***"


def _digest(params: dict[str, str], secret_names: list[str]) -> str:
    """sha256 over the non-secret params and the names of the secret ones, never their values: a
    digest anyone may read must not let a guess of a secret be confirmed against it. (Migration
    0003 recomputes stored digests with this same formula.)"""
    public = {k: v for k, v in params.items() if k not in secret_names}
    canonical = json.dumps({"params": public, "secret": sorted(secret_names)}, sort_keys=True)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def create_profile(ctx: Context, name: str, version: str, document: ProfileDocument) -> ProfileView:
    check_name("profile", name)
    check_version("profile", version)
    if document.name is not None and document.name != name:
        raise UserError(f"profile file names {document.name!r}, not {name!r}")
    if document.version is not None and document.version != version:
        raise UserError(f"profile file has version {document.version!r}, not {version!r}")
    params = document.spec.params
    unknown = [s for s in document.secret_params if s not in params]
    if unknown:
        raise UserError(f"secret_params names params that spec.params lacks: {', '.join(unknown)}")
    secrets = sorted(set(document.secret_params))
    _check_values(f"{name}@{version}", params, secrets)
    digest = _digest(params, secrets)
    try:
        with ctx.store.write() as session:
            existing = _find(session, ctx.project_id, name, version)
            if existing is not None:
                same_secrets = {k: params[k] for k in secrets} == secret_values(session, existing, ctx.home)
                if existing.content_digest != digest or not same_secrets:
                    raise ConflictError(
                        f"profile {name}@{version} already exists with different content; "
                        "profile versions are immutable: publish a new version"
                    )
                return _view(existing, created=False)
            row = Profile(
                id=new_id("prf"),
                project_id=ctx.project_id,
                name=name,
                version=version,
                params={k: v for k, v in params.items() if k not in secrets},
                secret_names=secrets,
                content_digest=digest,
            )
            session.add(row)
            session.flush()
            if secrets:
                ring = keyring(ctx.home)
                session.add_all(
                    ProfileSecret(profile_id=row.id, name=s, value=ring.seal(params[s])) for s in secrets
                )
            session.flush()
            return _view(row, created=True)
    except IntegrityError:
        return create_profile(ctx, name, version, document)


def _check_values(ref: str, params: dict[str, str], secrets: list[str]) -> None:
    """A profile that cannot run is refused before its version is frozen, naming the param: a
    name one slip from a declared one (with the name meant), a required param missing, a value
    that does not fit its type. Which runner reads a profile is only settled when a job pairs it
    with a dataset, so this checks the likely one: the shell runner and the agent AGENT_NAME names
    when it is set (missing params included), else the chat runner (only the values set). A name
    no component declares and none resembles is left to the job, which warns of it (a task's
    task.toml may reference it)."""
    # The runners (and the agents and sandbox behind them) load only when a profile is created.
    from envloop.runners.params import check_params, misspelled_params  # noqa: PLC0415
    from envloop.runners.registry import get_runner  # noqa: PLC0415

    agent = params.get("AGENT_NAME", "").strip()
    runner = get_runner("envloop/shell@1" if agent else "envloop/chat@1")
    # Without AGENT_NAME the runner is a guess (a plugin runner may read other names), so only
    # what is set is checked; with it, the shell runner and its agent are settled.
    problems = misspelled_params(runner, params)
    problems += check_params(runner, params, hidden=secrets, present_only=not agent)
    if problems:
        raise UserError(f"profile {ref}: {problems[0]}")


def _find(session: Session, project_id: str, name: str, version: str) -> Profile | None:
    return session.scalar(
        select(Profile).where(
            Profile.project_id == project_id, Profile.name == name, Profile.version == version
        )
    )


def resolve_profile(session: Session, project_id: str, ref: str) -> Profile:
    name, version = split_ref("profile", ref)
    row = _find(session, project_id, name, version)
    if row is None:
        raise NotFoundError(f"unknown profile {ref!r}")
    return row


def _view(row: Profile, created: bool | None = None) -> ProfileView:
    params = dict(row.params)
    for name in row.secret_names:
        params[name] = MASK
    return ProfileView(
        name=row.name,
        version=row.version,
        ref=f"{row.name}@{row.version}",
        params=dict(sorted(params.items())),
        secret_params=list(row.secret_names),
        digest=row.content_digest,
        created_at=row.created_at,
        created=created,
    )


def get_profile(ctx: Context, ref: str) -> ProfileView:
    with ctx.store.read() as session:
        return _view(resolve_profile(session, ctx.project_id, ref))


def list_profiles(ctx: Context) -> list[ProfileView]:
    with ctx.store.read() as session:
        rows = session.scalars(
            select(Profile)
            .where(Profile.project_id == ctx.project_id)
            .order_by(Profile.name, Profile.version)
        )
        return [_view(row) for row in rows]
