"""What the scripted endpoint answers (`Reply`), what it was sent (`Received`), and ready-made
responders for replies that depend on the request."""

import json
from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field

from envloop.models.gemini_translation import chat_request

ReplyProtocol = Literal["openai", "openai-responses", "anthropic", "gemini"]
"""Chat Completions, the Responses API, Messages, or the Gemini API (generateContent)."""


class ScriptedToolCall(BaseModel):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None


class Reply(BaseModel):
    """One answer. A `status` of 400 or more sends an error in the protocol's own shape instead."""

    text: str = ""
    reasoning: str | None = None
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    stop: Literal["end", "length", "tool_calls"] | None = Field(
        default=None, description="default: tool_calls when there are any, else end"
    )
    status: int = 200
    error: str = "scripted error"
    headers: dict[str, str] = Field(default_factory=dict)
    delay_sec: float = Field(default=0.0, description="wait this long before answering")
    disconnect: bool = Field(default=False, description="close the connection without any answer")
    input_tokens: int | None = None
    output_tokens: int | None = None

    @property
    def stop_reason(self) -> str:
        return self.stop or ("tool_calls" if self.tool_calls else "end")


class Received(BaseModel):
    """One request as the server saw it (headers with lower-case names)."""

    protocol: ReplyProtocol
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def model(self) -> str:
        if self.protocol == "gemini":  # named by the path: /v1beta/models/MODEL:generateContent
            return self.path.partition("/models/")[2].rpartition(":")[0]
        return str(self.body.get("model", ""))

    @property
    def stream(self) -> bool:
        if self.protocol == "gemini":
            return self.path.endswith(":streamGenerateContent")
        return bool(self.body.get("stream"))

    @property
    def chat_messages(self) -> list[dict[str, Any]]:
        """A Gemini request's contents as Chat Completions messages (as the gateway sends them)."""
        return list(chat_request(self.body, self.model, stream=False)["messages"])

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation; for the Responses API its `input` items (a string input is one user
        message), where function calls and their outputs are items with a `type` and no role; for the
        Gemini API its contents as Chat Completions messages."""
        if self.protocol == "openai-responses":
            given = self.body.get("input")
            if isinstance(given, str):
                return [{"role": "user", "content": given}]
            return [item for item in given if isinstance(item, dict)] if isinstance(given, list) else []
        if self.protocol == "gemini":
            return self.chat_messages
        messages = self.body.get("messages")
        return messages if isinstance(messages, list) else []

    @property
    def system(self) -> str | None:
        if self.protocol == "anthropic":
            system = self.body.get("system")
            return system if isinstance(system, str) else None
        if self.protocol == "openai-responses" and isinstance(self.body.get("instructions"), str):
            return str(self.body["instructions"])

        return next((text_of(m) for m in self.messages if m.get("role") in ("system", "developer")), None)

    @property
    def prompt(self) -> str:
        """The text of the last user turn (text blocks only, tool results left out)."""
        users = [m for m in self.messages if m.get("role") == "user"]
        return text_of(users[-1]) if users else ""


_TEXT_BLOCKS = ("text", "input_text", "output_text")


def text_of(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(block.get("text", ""))
            for block in content
            if isinstance(block, dict) and block.get("type") in _TEXT_BLOCKS
        )
    return ""


def count_tokens(text: str) -> int:
    """A deterministic stand-in for a tokenizer: whitespace-separated words."""
    return len(text.split())


def input_tokens(received: Received) -> int:
    texts = [received.system or ""]
    for message in received.messages:
        # Responses API items without content: a function call's arguments, a tool's output.
        content = message.get("content", message.get("output", message.get("arguments")))
        texts.append(content if isinstance(content, str) else json.dumps(content))
    return max(1, sum(count_tokens(t) for t in texts))


def output_tokens(reply: Reply) -> int:
    parts = [reply.text, reply.reasoning or ""] + [json.dumps(c.arguments) for c in reply.tool_calls]
    return max(1, sum(count_tokens(p) for p in parts))


Responder = Callable[[Received], Reply]


def echo() -> Responder:
    """Answers every request with its own prompt."""
    return lambda received: Reply(text=received.prompt)


def answers(mapping: Mapping[str, str], unknown: str = "I do not know.") -> Responder:
    """Answers each prompt from a table (a model that knows exactly these answers)."""
    table = dict(mapping)
    return lambda received: Reply(text=table.get(received.prompt, unknown))
