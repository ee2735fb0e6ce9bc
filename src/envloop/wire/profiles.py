"""Profiles on the wire: the profile file and how a stored profile reads back."""

import json
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import ConfigDict, Field, StrictStr, ValidationError
from pydantic.dataclasses import dataclass

from envloop.core.lazy import LazyModel
from envloop.core.nesting import NestedTooDeepError, load_json
from envloop.errors import UserError
from envloop.wire.request import REQUEST

PROFILE_SCHEMA = "envplatform.profile/v2"


class ProfileSpec(LazyModel):
    """Params reach commands as environment variables, which are text: a number or a boolean would
    have to become text by a rule the author never chose (is 5.0 "5" or "5.0"?), so only strings
    are accepted and the file says the text itself."""

    model_config = ConfigDict(extra="forbid")
    params: dict[str, StrictStr]


class ProfileDocument(LazyModel):
    """The profile file, as the product documents show it."""

    model_config = ConfigDict(extra="forbid")
    schema_version: Literal["envplatform.profile/v2"]
    name: str | None = None
    version: str | None = None
    secret_params: list[str] = Field(default_factory=list)
    spec: ProfileSpec


class ProfileView(LazyModel):
    name: str
    version: str
    ref: str
    params: dict[str, str] = Field(description="secret values shown as ***")
    secret_params: list[str]
    digest: str
    created_at: datetime
    created: bool | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="only on create: false when identical content already had this version",
    )


@dataclass(config=REQUEST, frozen=True)
class CreateProfile:
    name: str
    version: str
    document: ProfileDocument


__all__ = [
    "PROFILE_SCHEMA",
    "CreateProfile",
    "ProfileDocument",
    "ProfileSpec",
    "ProfileView",
]


def read_profile_file(path: Path) -> ProfileDocument:
    try:
        raw = load_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not valid JSON ({exc})") from None
    except NestedTooDeepError as exc:
        raise UserError(f"{path}: {exc}") from None
    try:
        return ProfileDocument.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "document"
        raise UserError(f"{path}: {where}: {first['msg']}") from None
