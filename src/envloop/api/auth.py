"""Who is calling: an API key (its project, every operation) or a share token (one job, reads only).

Every /v1 endpoint except health depends on one of the functions below, so a route's signature
says what it allows. A request for another project's resource gets 404, like an unknown one: a key
never learns what other projects hold.
"""

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from envloop.errors import NotFoundError
from envloop.services.context import Context
from envloop.services.keys import authenticate_key, project_context
from envloop.services.shares import resolve_share
from envloop.services.trial_reads import trial_row

bearer = HTTPBearer(
    auto_error=False,
    scheme_name="bearer",
    description="A project's API key (`el key create`), or a share token, which reads one job only.",
)


@dataclass(frozen=True)
class Caller:
    ctx: Context
    shared_job: str | None
    """The one job a share token may read; None for an API key."""


def installation(request: Request) -> Context:
    """The server's own context (store, artifacts); requests see it through their project."""
    ctx: Context | None = request.app.state.context
    if ctx is None:
        raise RuntimeError("the app was created without a store; pass a Context to create_app")
    return ctx


def caller(
    base: Annotated[Context, Depends(installation)],
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Caller:
    if credentials is None:
        raise HTTPException(
            401, "missing credentials: send Authorization: Bearer KEY", {"WWW-Authenticate": "Bearer"}
        )
    token = credentials.credentials
    project_id = authenticate_key(base.store, token)
    if project_id is not None:
        return Caller(project_context(base, project_id), None)
    grant = resolve_share(base.store, token)
    if grant is not None:
        return Caller(project_context(base, grant.project_id), grant.job_id)
    raise HTTPException(401, "unknown, revoked or expired credentials", {"WWW-Authenticate": "Bearer"})


def project(who: Annotated[Caller, Depends(caller)]) -> Context:
    """Anything beyond reading one shared job needs an API key."""
    if who.shared_job is not None:
        raise HTTPException(403, "a share token can only read the job it was made for")
    return who.ctx


def job_reader(job_id: str, who: Annotated[Caller, Depends(caller)]) -> Context:
    """Reads of one job: any key of its project, or a share token made for it."""
    if who.shared_job is not None and who.shared_job != job_id:
        raise NotFoundError(f"unknown job {job_id!r}")
    return who.ctx


def trial_reader(trial_id: str, who: Annotated[Caller, Depends(caller)]) -> Context:
    """Reads of one trial: any key of its project, or a share token made for its job."""
    if who.shared_job is not None and trial_row(who.ctx, trial_id).job_id != who.shared_job:
        raise NotFoundError(f"unknown trial {trial_id!r}")
    return who.ctx


ProjectContext = Annotated[Context, Depends(project)]
JobReader = Annotated[Context, Depends(job_reader)]
TrialReader = Annotated[Context, Depends(trial_reader)]
