"""API keys and share links as they read back (the secret only at creation), and the requests
that make, list and revoke them."""

from datetime import datetime, timedelta
from typing import Annotated

from pydantic import Field
from pydantic.dataclasses import dataclass

from envloop.core.lazy import LazyModel
from envloop.wire.request import REQUEST

MAX_EXPIRY = timedelta(days=3650)


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


@dataclass(config=REQUEST, frozen=True)
class CreateKey:
    name: Annotated[str | None, Field(description="a label to recognise the key by")] = None


@dataclass(config=REQUEST, frozen=True)
class RevokeKey:
    key_id: str


@dataclass(config=REQUEST, frozen=True)
class CreateShare:
    job_id: str
    expires_in_sec: Annotated[
        float | None, Field(gt=0, le=MAX_EXPIRY.total_seconds(), description="None: until revoked")
    ] = None


@dataclass(config=REQUEST, frozen=True)
class RevokeShare:
    share_id: str


__all__ = [
    "ApiKeyView",
    "CreateKey",
    "CreateShare",
    "CreatedKey",
    "CreatedShare",
    "RevokeKey",
    "RevokeShare",
    "ShareView",
]
