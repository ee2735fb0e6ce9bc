"""The exact text the model reads for a request, as the chat format renders it.

Counting tokens (`POST /v1/messages/count_tokens`, the context check before a generation) and
continuing a prompt must use the very prompt the chat format builds, tools and all, so the text
comes from the chat format's own handler: it is given a stand-in for the model that keeps the
prompt instead of evaluating it.
"""

from typing import Any, NoReturn

from envloop.models.local import CHAT_FORMAT


class _Rendered(Exception):
    def __init__(self, prompt: str) -> None:
        super().__init__("rendered")
        self.prompt = prompt


class _PromptKeeper:
    """Takes the place of the model in the chat handler: the first completion asked for is the
    prompt, and nothing is evaluated."""

    verbose = False

    def create_completion(self, *, prompt: str, **_: Any) -> NoReturn:
        raise _Rendered(prompt)


def render_prompt(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    """The prompt of a chat request: with `tools`, the one the model chooses between a message
    and a call from (every choice continues it); without, the plain chat prompt."""
    from llama_cpp import llama_chat_format  # noqa: PLC0415  (optional extra, loaded only to serve)

    handler: Any = llama_chat_format.get_chat_completion_handler(CHAT_FORMAT)
    try:
        choice = "auto" if tools else None
        handler(llama=_PromptKeeper(), messages=messages, tools=tools or None, tool_choice=choice)
    except _Rendered as rendered:
        return rendered.prompt
    raise RuntimeError(f"the {CHAT_FORMAT} chat format asked for no completion")
