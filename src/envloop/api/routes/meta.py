"""Health, the one endpoint that needs no credentials."""

from fastapi import APIRouter

from envloop import __version__
from envloop.api.schemas import Health

router = APIRouter(prefix="/v1")


@router.get("/health", tags=["meta"])
def health() -> Health:
    """Whether the server answers; the only endpoint that needs no credentials."""
    return Health(status="ok", version=__version__)
