"""API keys and share links as they read back (the secret only at creation)."""

from datetime import datetime

from pydantic import Field

from envloop.core.lazy import LazyModel


class ApiKeyView(LazyModel):
    id: str
    name: str
    project: str
    prefix: str = Field(description="the key's first characters, to recognise it in a list")
    created_at: datetime
    revoked_at: datetime | None
    last_used_at: datetime | None


class CreatedKey(ApiKeyView):
    key: str = Field(description="the secret itself; shown only at creation, store it now")


class ShareView(LazyModel):
    id: str
    job_id: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    active: bool = Field(description="neither expired nor revoked")


class CreatedShare(ShareView):
    token: str = Field(description="the read-only token; shown only at creation")
    path: str = Field(description="the job's page for holders of the token, relative to the server")
