"""Model endpoint settings read from a profile's params, checked once, typed from then on.

`ModelParams` declares the params (their meaning, type and bounds: `el runner show` prints them).
A param that is not set is not sent: each server then applies its own default. The Messages
protocol requires `max_tokens`, hence its default of 1024 there. Thinking budgets are not offered:
the effort level is the knob both protocols share. Without `MODEL_API_KEY` an empty credential is
sent rather than letting an SDK fall back to the worker's own environment variables, whose key must
never reach an endpoint a profile names.
"""

from collections.abc import Mapping
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict

from envloop.core.params import ComponentParams, param, read_params, secret_param

ModelProtocol = Literal["openai", "anthropic"]
PROTOCOLS: tuple[str, ...] = ("openai", "anthropic")
ANTHROPIC_DEFAULT_MAX_TOKENS = 1024


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


def _http_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("not an http:// or https:// URL")
    return url


HttpUrlText = Annotated[str, AfterValidator(_http_url)]


class ModelParams(ComponentParams):
    """The params of a model endpoint, shared by the chat runner and the model-calling agents."""

    MODEL_PROTOCOL: ModelProtocol = param("openai (Chat Completions) or anthropic (Messages)", default=...)
    MODEL_BASE_URL: HttpUrlText = param(
        "openai: the URL ending in /v1; anthropic: the root URL (as each SDK takes it)",
        default=...,
        expect="an http:// or https:// URL",
    )
    MODEL_NAME: str = param("the model (or alias, e.g. team-model/sft) to ask", default=...)
    MODEL_API_KEY: str | None = secret_param("sent as the protocol's credential; none sent when unset")
    MAX_OUTPUT_TOKENS: int | None = param("max_tokens on both protocols (anthropic default: 1024)", ge=1)
    TEMPERATURE: float | None = param("sampling temperature; the server's default when unset", ge=0)
    TOP_P: float | None = param("nucleus sampling; the server's default when unset", gt=0, le=1)
    REASONING_EFFORT: str | None = param(
        "openai: reasoning_effort; anthropic: output_config.effort; not sent when unset"
    )
    STREAM: bool = param("stream responses (many compatible servers cannot)", default=False)
    SYSTEM_PROMPT: str | None = param("a system prompt before the conversation")
    REQUEST_TIMEOUT_SEC: float = param("one HTTP request's timeout, in seconds", default=120.0, gt=0)
    MAX_RETRIES: int = param("retries of rate limits and transient failures", default=4, ge=0, le=20)
    MAX_CONCURRENCY: int = param("calls in flight to this endpoint from one worker", default=8, ge=1)

    def settings(self) -> ModelSettings:
        max_tokens = self.MAX_OUTPUT_TOKENS
        if self.MODEL_PROTOCOL == "anthropic" and max_tokens is None:
            max_tokens = ANTHROPIC_DEFAULT_MAX_TOKENS
        return ModelSettings(
            protocol=self.MODEL_PROTOCOL,
            base_url=self.MODEL_BASE_URL,
            model=self.MODEL_NAME,
            api_key=self.MODEL_API_KEY or "",
            max_output_tokens=max_tokens,
            temperature=self.TEMPERATURE,
            top_p=self.TOP_P,
            reasoning_effort=self.REASONING_EFFORT,
            stream=self.STREAM,
            system_prompt=self.SYSTEM_PROMPT,
            request_timeout_sec=self.REQUEST_TIMEOUT_SEC,
            max_retries=self.MAX_RETRIES,
            max_concurrency=self.MAX_CONCURRENCY,
        )


def read_model_settings(params: Mapping[str, str]) -> tuple[ModelSettings | None, list[str]]:
    """The settings the params describe, or None with every problem found (one sentence each)."""
    read, problems = read_params(ModelParams, params)
    return (None, problems) if read is None else (read.settings(), [])


def model_settings(params: Mapping[str, str]) -> ModelSettings:
    """The settings, or ModelConfigError naming every problem."""
    settings, problems = read_model_settings(params)
    if settings is None:
        raise ModelConfigError("; ".join(problems))
    return settings
