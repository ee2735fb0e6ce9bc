"""Health (no credentials needed) and the runners this server can run."""

from fastapi import APIRouter

from envloop import __version__
from envloop.api.auth import ProjectContext
from envloop.api.schemas import ERRORS, Health
from envloop.runners.base import RunnerInfo
from envloop.runners.registry import list_runners

router = APIRouter(prefix="/v1")


@router.get("/health", tags=["meta"])
def health() -> Health:
    """Whether the server answers; the only endpoint that needs no credentials."""
    return Health(status="ok", version=__version__)


@router.get("/runners", tags=["runners"], responses=ERRORS)
def runners(ctx: ProjectContext) -> list[RunnerInfo]:
    """Runners this server can run, with the profile params each reads and requires."""
    return list_runners()
