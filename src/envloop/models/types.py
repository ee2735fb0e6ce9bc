"""What a model client is given and what it returns, the same for every model protocol.

A conversation is a list of `Message`s; a request may offer tools (`ToolSpec`), and a response may
ask for tool calls (`ToolCall`). The shapes are protocol-neutral so that a runner or a tool-calling
agent is written once and runs against Chat Completions and Messages endpoints alike. Where a
protocol needs its own bytes back on the next turn (the Messages protocol's thinking blocks carry
signatures that must be returned verbatim), the assistant message keeps them in `native`.
"""

from typing import Any, Literal

from pydantic import BaseModel, Field

from envloop.core.trajectory import ToolCall, Usage

__all__ = [
    "Message",
    "ModelError",
    "ModelErrorKind",
    "ModelRequest",
    "ModelResponse",
    "ResponseStop",
    "Role",
    "ToolCall",
    "ToolSpec",
    "Usage",
]

Role = Literal["user", "assistant", "tool"]
ResponseStop = Literal["end", "tool_calls", "length", "refusal", "other"]
"""Why the model stopped: its own end of turn, a request for tools, the output token limit, a refusal."""

ModelErrorKind = Literal[
    "connection", "timeout", "rate_limit", "server", "auth", "bad_request", "not_found", "bad_response"
]


class ToolSpec(BaseModel):
    """A tool offered to the model: a name, what it does, and a JSON Schema of its arguments."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class Message(BaseModel):
    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = Field(default=None, description="on a tool message: the call it answers")
    is_error: bool = Field(default=False, description="on a tool message: the tool failed")
    native: list[dict[str, Any]] | None = Field(
        default=None, description="an assistant turn as the protocol returned it, replayed verbatim"
    )


class ModelRequest(BaseModel):
    """One call: the conversation so far and the tools on offer. Generation settings come from the
    client's `ModelSettings`, so every call of a trial uses the profile's settings unchanged."""

    messages: list[Message]
    system: str | None = None
    tools: list[ToolSpec] = Field(default_factory=list)
    tool_choice: str | None = Field(
        default=None,
        description="auto, required (some tool), or a tool's name (that tool); None leaves it to the server",
    )


class ModelResponse(BaseModel):
    text: str
    reasoning: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    stop: ResponseStop
    finish_reason: str | None = Field(default=None, description="the protocol's own word for `stop`")
    usage: Usage = Field(default_factory=Usage)
    model: str | None = Field(default=None, description="the model the server says answered")
    response_id: str | None = None
    message: Message = Field(description="the assistant turn to append to the conversation")
    attempts: int = Field(default=1, description="HTTP requests made, retries included")
    latency_ms: float = 0.0


class ModelError(Exception):
    """A model call that failed for good (after any retries). `message` carries the server's words."""

    def __init__(
        self,
        message: str,
        *,
        kind: ModelErrorKind,
        status: int | None = None,
        retry_after: float | None = None,
        attempts: int = 1,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.status = status
        self.retry_after = retry_after
        """Seconds the server asked us to wait before trying again (Retry-After), when it said."""
        self.attempts = attempts

    @property
    def retryable(self) -> bool:
        return self.kind in ("connection", "timeout", "rate_limit", "server")
