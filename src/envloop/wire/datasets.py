"""Datasets on the wire: a revision and its members."""

from datetime import datetime

from pydantic import Field

from envloop.core.lazy import LazyModel


class MemberView(LazyModel):
    position: int
    name: str
    digest: str


class DatasetView(LazyModel):
    name: str
    version: int
    ref: str
    runner: str
    kind: str
    scorer: str | None
    digest: str
    created_at: datetime
    member_count: int
    members: list[MemberView] | None = None
    created: bool | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="only on push: false when identical content already had this revision",
    )
