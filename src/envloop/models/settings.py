"""Model endpoint settings read from a profile's params, checked once, typed from then on.

| param | meaning | default |
|---|---|---|
| `MODEL_PROTOCOL` | `openai` (Chat Completions) or `anthropic` (Messages) | required |
| `MODEL_BASE_URL` | openai: URL ending in `/v1`; anthropic: the root URL (as each SDK takes it) | required |
| `MODEL_NAME` | the model (or alias, e.g. `team-model/sft`) to ask | required |
| `MODEL_API_KEY` | secret; sent as the protocol's credential | none sent |
| `MAX_OUTPUT_TOKENS` | `max_tokens` on both protocols | openai: server's; anthropic: 1024 |
| `TEMPERATURE`, `TOP_P` | sampling | server's |
| `REASONING_EFFORT` | openai: `reasoning_effort`; anthropic: `output_config.effort` | not sent |
| `STREAM` | `true` streams responses (many compatible servers cannot) | `false` |
| `SYSTEM_PROMPT` | a system prompt before the conversation | none |
| `REQUEST_TIMEOUT_SEC` | one HTTP request's timeout | 120 |
| `MAX_RETRIES` | retries of rate limits and transient failures | 4 |
| `MAX_CONCURRENCY` | calls in flight to this endpoint from one worker | 8 |

A param that is not set is not sent: each server then applies its own default. The Messages
protocol requires `max_tokens`, hence its default. Thinking budgets are not offered: the effort
level is the knob both protocols share. Without `MODEL_API_KEY` an empty credential is sent rather
than letting an SDK fall back to the worker's own environment variables, whose key must never
reach an endpoint a profile names.
"""

import math
from collections.abc import Callable, Mapping
from typing import Literal, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

ModelProtocol = Literal["openai", "anthropic"]
PROTOCOLS: tuple[str, ...] = ("openai", "anthropic")

REQUIRED_PARAMS = ("MODEL_PROTOCOL", "MODEL_BASE_URL", "MODEL_NAME")
OPTIONAL_PARAMS = (
    "MODEL_API_KEY",
    "MAX_OUTPUT_TOKENS",
    "TEMPERATURE",
    "TOP_P",
    "REASONING_EFFORT",
    "STREAM",
    "SYSTEM_PROMPT",
    "REQUEST_TIMEOUT_SEC",
    "MAX_RETRIES",
    "MAX_CONCURRENCY",
)
ANTHROPIC_DEFAULT_MAX_TOKENS = 1024

T = TypeVar("T")


class ModelSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    protocol: ModelProtocol
    base_url: str
    model: str
    api_key: str = ""
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    reasoning_effort: str | None = None
    stream: bool = False
    system_prompt: str | None = None
    request_timeout_sec: float = 120.0
    max_retries: int = 4
    max_concurrency: int = 8

    @property
    def endpoint(self) -> str:
        """What concurrency limits and pooled connections are keyed by."""
        return f"{self.protocol} {self.base_url}"

    def summary(self) -> dict[str, object]:
        """The settings a trajectory records: everything but the credential."""
        return self.model_dump(exclude={"api_key"}, exclude_none=True)


class ModelConfigError(ValueError):
    """Params that cannot make a model client; the message names the param at fault."""


def _integer(text: str) -> int:
    return int(text.strip())


def _number(text: str) -> float:
    value = float(text.strip())
    if not math.isfinite(value):
        raise ValueError(text)
    return value


def _boolean(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise ValueError(text)


class _Reader:
    """Collects one problem per bad param instead of stopping at the first."""

    def __init__(self, params: Mapping[str, str]) -> None:
        self.params = params
        self.problems: list[str] = []

    def get(self, name: str, parse: Callable[[str], T], check: Callable[[T], bool], expect: str) -> T | None:
        raw = self.params.get(name)
        if raw is None or raw.strip() == "":
            return None
        try:
            value = parse(raw)
        except ValueError:
            value = None
        if value is None or not check(value):
            self.problems.append(f"{name} must be {expect}, not {raw.strip()[:40]!r}")
            return None
        return value


def _url_problem(url: str) -> str | None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return f"MODEL_BASE_URL must be an http:// or https:// URL, not {url[:80]!r}"
    return None


def read_model_settings(params: Mapping[str, str]) -> tuple[ModelSettings | None, list[str]]:
    """The settings the params describe, or None with every problem found (one sentence each)."""
    problems: list[str] = []
    protocol = (params.get("MODEL_PROTOCOL") or "").strip()
    if not protocol:
        problems.append("MODEL_PROTOCOL is required (openai or anthropic)")
    elif protocol not in PROTOCOLS:
        problems.append(f"unknown MODEL_PROTOCOL {protocol[:40]!r} (choose openai or anthropic)")
    base_url = (params.get("MODEL_BASE_URL") or "").strip()
    if not base_url:
        problems.append("MODEL_BASE_URL is required")
    elif (problem := _url_problem(base_url)) is not None:
        problems.append(problem)
    model = (params.get("MODEL_NAME") or "").strip()
    if not model:
        problems.append("MODEL_NAME is required")
    read = _Reader(params)
    max_tokens = read.get("MAX_OUTPUT_TOKENS", _integer, lambda v: v >= 1, "a whole number ≥ 1")
    temperature = read.get("TEMPERATURE", _number, lambda v: v >= 0, "a number ≥ 0")
    top_p = read.get("TOP_P", _number, lambda v: 0 < v <= 1, "a number in (0, 1]")
    stream = read.get("STREAM", _boolean, lambda v: True, "true or false")
    timeout = read.get("REQUEST_TIMEOUT_SEC", _number, lambda v: v > 0, "a number of seconds > 0")
    retries = read.get("MAX_RETRIES", _integer, lambda v: 0 <= v <= 20, "a whole number from 0 to 20")
    concurrency = read.get("MAX_CONCURRENCY", _integer, lambda v: v >= 1, "a whole number ≥ 1")
    problems.extend(read.problems)
    if problems:
        return None, problems
    effort = (params.get("REASONING_EFFORT") or "").strip() or None
    if protocol == "anthropic" and max_tokens is None:
        max_tokens = ANTHROPIC_DEFAULT_MAX_TOKENS
    settings = ModelSettings(
        protocol=protocol,
        base_url=base_url,
        model=model,
        api_key=params.get("MODEL_API_KEY") or "",
        max_output_tokens=max_tokens,
        temperature=temperature,
        top_p=top_p,
        reasoning_effort=effort,
        stream=bool(stream),
        system_prompt=params.get("SYSTEM_PROMPT") or None,
        request_timeout_sec=timeout if timeout is not None else 120.0,
        max_retries=retries if retries is not None else 4,
        max_concurrency=concurrency if concurrency is not None else 8,
    )
    return settings, []


def model_settings(params: Mapping[str, str]) -> ModelSettings:
    """The settings, or ModelConfigError naming every problem."""
    settings, problems = read_model_settings(params)
    if settings is None:
        raise ModelConfigError("; ".join(problems))
    return settings
