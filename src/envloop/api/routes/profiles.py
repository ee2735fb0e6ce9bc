"""Profiles: versioned, immutable model/agent params (secret values never come back)."""

from fastapi import APIRouter, Response

from envloop.api.auth import ProjectContext
from envloop.api.schemas import ERRORS, ProfileCreate
from envloop.services import profiles
from envloop.services.profiles import ProfileView

router = APIRouter(prefix="/v1/profiles", tags=["profiles"], responses=ERRORS)


@router.get("")
def list_profiles(ctx: ProjectContext) -> list[ProfileView]:
    return profiles.list_profiles(ctx)


@router.post(
    "",
    status_code=201,
    responses={200: {"model": ProfileView, "description": "Identical content: the existing version"}},
)
def create_profile(body: ProfileCreate, ctx: ProjectContext, response: Response) -> ProfileView:
    """Publish NAME@VERSION; the same content again is a no-op, different content is refused (409)."""
    view = profiles.create_profile(ctx, body.name, body.version, body.document)
    if not view.created:
        response.status_code = 200
    return view


@router.get("/{ref:path}")
def get_profile(ref: str, ctx: ProjectContext) -> ProfileView:
    return profiles.get_profile(ctx, ref)
