"""What `el model serve` serves: named aliases, each a weights file and its serving settings.

`--model base` serves the bundled SmolLM2 as `NAME/base`; `--model sft=PATH` serves another GGUF
file as `NAME/sft`; `--set sft.system_prompt=…` gives one alias its own settings. Two aliases may
share one weights file (it is loaded once) and still differ by their settings.
"""

import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from envloop.errors import UserError

ALIAS_PATTERN = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")
DEFAULT_NAME = "smollm2"
DEFAULT_ALIAS = "base"


class AliasSettings(BaseModel):
    """How one alias answers. The system prompt applies to every request; the sampling values are
    defaults for requests that give none; `max_tokens` caps what any request may ask for."""

    model_config = ConfigDict(extra="forbid")

    system_prompt: str | None = Field(
        default=None, description="put before the request's own system text, on every request"
    )
    temperature: float | None = Field(default=None, ge=0, le=2, description="when the request gives none")
    top_p: float | None = Field(default=None, gt=0, le=1, description="when the request gives none")
    seed: int | None = Field(default=None, ge=0, description="when the request gives none")
    max_tokens: int = Field(default=1024, ge=1, le=32768, description="the most output tokens per request")
    context_tokens: int = Field(default=2048, ge=256, le=131072, description="the context window")


class ServedAlias(BaseModel):
    name: str = Field(description="the alias alone, e.g. sft")
    model_path: Path | None = Field(description="a GGUF file; None: the bundled SmolLM2-135M-Instruct")
    settings: AliasSettings = Field(default_factory=AliasSettings)

    def model_id(self, endpoint: str) -> str:
        """The name clients send as `model`: ENDPOINT/ALIAS."""
        return f"{endpoint}/{self.name}"


def _check_alias(name: str, what: str) -> str:
    if not ALIAS_PATTERN.fullmatch(name):
        raise UserError(f"{what} {name!r}: use lower-case letters, digits, '.', '_' or '-' (at most 63)")
    return name


def parse_models(models: list[str], settings: list[str]) -> list[ServedAlias]:
    """`--model ALIAS[=PATH]` and `--set ALIAS.FIELD=VALUE` options as aliases, in the order given;
    no `--model` at all serves the bundled model as `base`."""
    aliases: dict[str, Path | None] = {}
    for option in models or [DEFAULT_ALIAS]:
        name, has_path, path = option.partition("=")
        _check_alias(name.strip(), "alias")
        if name.strip() in aliases:
            raise UserError(f"alias {name.strip()!r} is given twice")
        if has_path and not path.strip():
            raise UserError(f"--model {option!r}: give a GGUF file after '=', or the alias alone")
        aliases[name.strip()] = Path(path.strip()).expanduser() if has_path else None
    overrides: dict[str, dict[str, str]] = {name: {} for name in aliases}
    for option in settings:
        target, has_value, value = option.partition("=")
        alias, _, field = target.partition(".")
        if not has_value or not field:
            raise UserError(f"--set {option!r}: expected ALIAS.FIELD=VALUE, e.g. sft.temperature=0.2")
        if alias not in overrides:
            raise UserError(f"--set {option!r}: no --model gives alias {alias!r}")
        if field not in AliasSettings.model_fields:
            known = ", ".join(AliasSettings.model_fields)
            raise UserError(f"--set {option!r}: unknown setting {field!r} (one of {known})")
        overrides[alias][field] = value
    served = []
    for name, model_path in aliases.items():
        try:
            alias_settings = AliasSettings.model_validate(overrides[name])
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise UserError(f"--set {name}.{where}: {first['msg']}") from None
        served.append(ServedAlias(name=name, model_path=model_path, settings=alias_settings))
    return served


def check_endpoint_name(name: str) -> str:
    return _check_alias(name, "endpoint name")
