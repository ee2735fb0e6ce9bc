"""Access: a project's API keys, and share links that let a token read one job."""

from fastapi import APIRouter

from envloop.api.auth import ProjectContext
from envloop.api.schemas import ERRORS, KeyRequest, ShareRequest
from envloop.services import keys, shares
from envloop.services.keys import ApiKeyView, CreatedKey
from envloop.services.shares import CreatedShare, ShareView

router = APIRouter(prefix="/v1", responses=ERRORS)


@router.get("/keys", tags=["keys"])
def list_keys(ctx: ProjectContext) -> list[ApiKeyView]:
    """The calling project's keys, revoked ones included; secrets are never shown again."""
    return keys.list_keys(ctx)


@router.post("/keys", tags=["keys"], status_code=201)
def create_key(body: KeyRequest, ctx: ProjectContext) -> CreatedKey:
    """Another key for the calling project; the response is the only time its secret is shown."""
    return keys.create_key(ctx, body.name)


@router.post("/keys/{key_id}/revoke", tags=["keys"])
def revoke_key(key_id: str, ctx: ProjectContext) -> ApiKeyView:
    return keys.revoke_key(ctx, key_id)


@router.post("/jobs/{job_id}/shares", tags=["shares"], status_code=201)
def create_share(job_id: str, body: ShareRequest, ctx: ProjectContext) -> CreatedShare:
    """A read-only token for this job; the response is the only time the token is shown."""
    return shares.create_share(ctx, job_id, body.expires_in_sec)


@router.get("/jobs/{job_id}/shares", tags=["shares"])
def list_shares(job_id: str, ctx: ProjectContext) -> list[ShareView]:
    return shares.list_shares(ctx, job_id)


@router.post("/shares/{share_id}/revoke", tags=["shares"])
def revoke_share(share_id: str, ctx: ProjectContext) -> ShareView:
    return shares.revoke_share(ctx, share_id)
