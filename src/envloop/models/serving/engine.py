"""The weights behind the aliases: llama.cpp models loaded in this process, one per weights file and
context size, each used by one request at a time (a llama.cpp context is not thread-safe).

Both protocols come here with a `ChatCall` in the Chat Completions message shape llama.cpp takes.
The `chatml-function-calling` format renders no tool results, so a tool's result reaches the model
as a user turn that names the tool. Tool calls come from grammar-constrained generation: a named
tool is always called; `auto` first lets the model choose between a call and a message (either then
continues that same prompt, so the model writes it knowing its tools, and the prompt already
evaluated is reused rather than evaluated again; an answer holds at most one call); `required`
calls the first tool when the model chose a message. `max_tokens` bounds messages and a call's
arguments alike.

A prompt that does not fit the alias's context is refused before anything is evaluated, in the
words the Messages protocol uses ("prompt is too long: N tokens > M maximum"); nothing is cut.
"""

import contextlib
import dataclasses
import json
import os
import queue
import threading
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from envloop.models.local import (
    CHAT_FORMAT,
    LocalModelError,
    bundled_model_path,
    llama_environment,
    server_installed,
)
from envloop.models.serving.aliases import ServedAlias
from envloop.models.serving.prompt import render_prompt

Finish = Literal["stop", "length", "tool_calls"]
ToolMode = Literal["auto", "none", "required", "named"]


class ServingError(Exception):
    """A request the endpoint refuses: its HTTP status and one line for the caller."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


@dataclass
class ChatCall:
    """One request, protocol-neutral: messages as Chat Completions dicts (system, user, assistant
    with `tool_calls`, tool with `tool_call_id`), tools as Chat Completions function tools."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_mode: ToolMode = "auto"
    tool_name: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: list[str] = field(default_factory=list)
    seed: int | None = None


@dataclass
class GeneratedCall:
    name: str
    arguments: str
    """The arguments as the model wrote them: JSON text (grammar-constrained to the tool's schema)."""


@dataclass
class Generation:
    text: str
    tool_calls: list[GeneratedCall]
    finish: Finish
    prompt_tokens: int
    completion_tokens: int


@dataclass
class _Weights:
    llama: Any
    lock: threading.Lock = field(default_factory=threading.Lock)


def _with_system_prompt(messages: list[dict[str, Any]], prompt: str | None) -> list[dict[str, Any]]:
    if not prompt:
        return messages
    if messages and messages[0]["role"] == "system":
        own = messages[0].get("content") or ""
        return [{"role": "system", "content": f"{prompt}\n\n{own}" if own else prompt}, *messages[1:]]
    return [{"role": "system", "content": prompt}, *messages]


def _tool_results_as_user_turns(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    names = {
        call["id"]: call["function"]["name"]
        for message in messages
        for call in message.get("tool_calls") or []
    }
    rendered = []
    for message in messages:
        if message["role"] == "tool":
            name = names.get(message.get("tool_call_id") or "", "the tool")
            rendered.append({"role": "user", "content": f"Result of {name}:\n{message.get('content') or ''}"})
        else:
            rendered.append(message)
    return rendered


@contextlib.contextmanager
def _context_errors() -> Iterator[None]:
    try:
        yield
    except ValueError as exc:  # llama.cpp's word for a prompt beyond the context window
        raise ServingError(400, (str(exc).splitlines() or ["bad request"])[0][:300]) from None


class Engine:
    """Every alias of one endpoint, addressed as `ENDPOINT/ALIAS`."""

    def __init__(self, endpoint: str, aliases: list[ServedAlias], threads: int) -> None:
        self.endpoint = endpoint
        self.aliases = {alias.model_id(endpoint): alias for alias in aliases}
        self.threads = threads
        self._weights: dict[tuple[Path, int], _Weights] = {}

    def model_ids(self) -> list[str]:
        return list(self.aliases)

    def load(self) -> None:
        """Load every weights file now, so a bad file is refused before the endpoint is announced."""
        if not server_installed():
            raise LocalModelError("llama-cpp-python is not installed; install the local-model extra")
        os.environ.update(llama_environment())  # read when llama.cpp's library loads
        from llama_cpp import Llama  # noqa: PLC0415  (optional extra, loaded only to serve)

        for alias in self.aliases.values():
            path = alias.model_path or bundled_model_path()
            key = (path, alias.settings.context_tokens)
            if key in self._weights:
                continue
            if not path.is_file():
                raise LocalModelError(f"alias {alias.name!r}: {path}: no such model file")
            try:
                llama = Llama(
                    model_path=str(path),
                    n_ctx=alias.settings.context_tokens,
                    n_threads=self.threads,
                    n_threads_batch=self.threads,
                    chat_format=CHAT_FORMAT,
                    flash_attn=True,
                    verbose=False,
                )
            except (ValueError, RuntimeError):
                raise LocalModelError(
                    f"alias {alias.name!r}: {path.name} is not a model llama.cpp can load"
                ) from None
            self._weights[key] = _Weights(llama)

    def alias(self, model_id: str) -> ServedAlias:
        served = self.aliases.get(model_id)
        if served is None:
            known = ", ".join(self.aliases)
            raise ServingError(404, f"unknown model {model_id[:200]!r}: this endpoint serves {known}")
        return served

    def _weights_of(self, alias: ServedAlias) -> _Weights:
        return self._weights[(alias.model_path or bundled_model_path(), alias.settings.context_tokens)]

    def _arguments(self, alias: ServedAlias, call: ChatCall) -> dict[str, Any]:
        settings = alias.settings
        temperature = call.temperature if call.temperature is not None else settings.temperature
        top_p = call.top_p if call.top_p is not None else settings.top_p
        seed = call.seed if call.seed is not None else settings.seed
        messages = _tool_results_as_user_turns(_with_system_prompt(call.messages, settings.system_prompt))
        arguments: dict[str, Any] = {
            "messages": messages,
            "temperature": 1.0 if temperature is None else temperature,
            "top_p": 1.0 if top_p is None else top_p,
            "max_tokens": min(call.max_tokens or settings.max_tokens, settings.max_tokens),
            "stop": call.stop or None,
        }
        if seed is not None:
            arguments["seed"] = seed
        return arguments

    def count_tokens(self, model_id: str, call: ChatCall) -> int:
        """How many tokens the model reads for this request (its prompt, tools included), counted
        with the model's own tokenizer; nothing is evaluated, so no turn of the weights is taken."""
        alias = self.alias(model_id)
        return len(self._prompt_tokens(self._weights_of(alias).llama, self._arguments(alias, call), call))

    def generate(self, model_id: str, call: ChatCall) -> Generation:
        """The whole answer at once."""
        *_, whole = self.stream(model_id, call)
        assert isinstance(whole, Generation)
        return whole

    def admit(self, model_id: str, call: ChatCall) -> int:
        """The prompt's size in tokens, once the request is known to be answerable: a served model,
        a `tool_choice` among the tools, a prompt that fits the alias's context. Nothing is
        evaluated, so a caller learns of a refusal at once, even while another request runs."""
        alias = self.alias(model_id)
        names = [tool["function"]["name"] for tool in call.tools]
        if call.tool_mode == "named" and call.tool_name not in names:
            raise ServingError(
                400, f"tool_choice names {(call.tool_name or '')[:100]!r}, which is not among the tools"
            )
        weights = self._weights_of(alias)
        tokens = len(self._prompt_tokens(weights.llama, self._arguments(alias, call), call))
        context = int(weights.llama.n_ctx())
        if tokens >= context:
            raise ServingError(
                400,
                f"prompt is too long: {tokens} tokens > {context - 1} maximum (the context of "
                f"{model_id} is {context} tokens; serve it with a larger {alias.name}.context_tokens)",
            )
        return tokens

    def stream(self, model_id: str, call: ChatCall) -> Iterator[str | Generation]:
        """Text pieces as the model writes them, then the whole `Generation` (tool calls arrive only
        in it: they are generated under a grammar and sent once complete)."""
        tokens = self.admit(model_id, call)
        alias = self.alias(model_id)
        weights = self._weights_of(alias)
        arguments = self._arguments(alias, call)
        with weights.lock, _context_errors():
            called = self._tool_call(weights.llama, arguments, call)
            if called is not None:
                # The call's generation read the prompt plus the tool's name the model chose: the
                # request's input is the prompt alone, as count_tokens says.
                yield dataclasses.replace(called, prompt_tokens=tokens)
            elif self._with_tools(call):
                prompt = self._prompt(arguments, call) + "message:\n"
                yield from self._continued(weights.llama, prompt, arguments, tokens)
            else:
                yield from self._text(weights.llama, arguments, tokens)

    @staticmethod
    def _with_tools(call: ChatCall) -> bool:
        return bool(call.tools) and call.tool_mode != "none"

    def _prompt(self, arguments: dict[str, Any], call: ChatCall) -> str:
        return render_prompt(arguments["messages"], call.tools if self._with_tools(call) else [])

    def _prompt_tokens(self, llama: Any, arguments: dict[str, Any], call: ChatCall) -> list[int]:
        tokens: list[int] = llama.tokenize(self._prompt(arguments, call).encode(), add_bos=True, special=True)
        return tokens

    def _tool_call(self, llama: Any, arguments: dict[str, Any], call: ChatCall) -> Generation | None:
        """The call the model makes, or None when it answers with a message instead."""
        if not self._with_tools(call):
            return None
        names = [tool["function"]["name"] for tool in call.tools]
        name = (
            call.tool_name if call.tool_mode == "named" else self._chosen_tool(llama, arguments, call, names)
        )
        if name is None:
            if call.tool_mode == "auto":
                return None
            name = names[0]
        choice = {"type": "function", "function": {"name": name}}
        return self._complete(llama, {**arguments, "tools": call.tools, "tool_choice": choice})

    def _chosen_tool(
        self, llama: Any, arguments: dict[str, Any], call: ChatCall, names: list[str]
    ) -> str | None:
        """The tool the model chooses to call, or None for a message: one grammar-constrained
        choice at temperature 0, written as the chat format's `auto` would. The call itself is
        then generated as a named one, which keeps to `max_tokens` (the format's `auto` writes a
        call's arguments without any limit) and continues the prompt evaluated here."""
        from llama_cpp.llama_grammar import LlamaGrammar  # noqa: PLC0415  (optional extra, loaded only to serve)

        options = " | ".join(json.dumps(f"functions.{name}:") for name in names)
        grammar = LlamaGrammar.from_string(
            f'root ::= functions | "message:"\nfunctions ::= {options}\n', verbose=False
        )
        prompt = self._prompt(arguments, call)
        chosen = llama.create_completion(prompt=prompt, temperature=0, max_tokens=None, grammar=grammar)
        text = str(chosen["choices"][0]["text"])
        name = text.removeprefix("functions.").removesuffix(":")
        return name if text.startswith("functions.") and name in names else None

    @staticmethod
    def _complete(llama: Any, arguments: dict[str, Any]) -> Generation:
        response = llama.create_chat_completion(**arguments)
        choice = response["choices"][0]
        message = choice["message"]
        calls = [
            GeneratedCall(name=c["function"]["name"], arguments=c["function"]["arguments"])
            for c in message.get("tool_calls") or []
        ]
        usage = response.get("usage") or {}
        finish: Finish = (
            "tool_calls" if calls else ("length" if choice.get("finish_reason") == "length" else "stop")
        )
        return Generation(
            text=message.get("content") or "",
            tool_calls=calls,
            finish=finish,
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
        )

    @staticmethod
    def _text(llama: Any, arguments: dict[str, Any], prompt_tokens: int) -> Iterator[str | Generation]:
        pieces: list[str] = []
        finish: Finish = "stop"
        for chunk in llama.create_chat_completion(**arguments, stream=True):
            choice = chunk["choices"][0]
            piece = choice["delta"].get("content")
            if piece:
                pieces.append(piece)
                yield piece
            if choice.get("finish_reason") == "length":
                finish = "length"
        # A streamed completion reports no usage: each piece is one token.
        yield Generation(
            text="".join(pieces),
            tool_calls=[],
            finish=finish,
            prompt_tokens=prompt_tokens,
            completion_tokens=len(pieces),
        )

    @staticmethod
    def _continued(
        llama: Any, prompt: str, arguments: dict[str, Any], prompt_tokens: int
    ) -> Iterator[str | Generation]:
        """A message written as the continuation of `prompt` (the chat format's end of turn ends it)."""
        pieces: list[str] = []
        finish: Finish = "stop"
        options = {k: v for k, v in arguments.items() if k not in ("messages", "stop")}
        stop = [*(arguments["stop"] or []), "<|im_end|>"]
        for chunk in llama.create_completion(prompt=prompt, stop=stop, stream=True, **options):
            choice = chunk["choices"][0]
            if choice.get("text"):
                pieces.append(choice["text"])
                yield choice["text"]
            if choice.get("finish_reason") == "length":
                finish = "length"
        yield Generation(
            text="".join(pieces),
            tool_calls=[],
            finish=finish,
            prompt_tokens=prompt_tokens,
            completion_tokens=len(pieces),
        )


class Waiting:
    """No piece yet: the model is still reading the prompt (or thinking of the next token)."""


WAITING = Waiting()


class Producer:
    """A streamed generation on a thread of its own, handed over piece by piece. When the caller
    goes away, `cancel()` stops it after the current token, which frees its weights for the next
    request (a generation left running would hold them until its `max_tokens`)."""

    def __init__(self, pieces: Iterator[str | Generation]) -> None:
        self._pieces = pieces
        self._queue: queue.SimpleQueue[str | Generation | BaseException | None] = queue.SimpleQueue()
        self._cancelled = threading.Event()
        threading.Thread(target=self._run, name="model-stream", daemon=True).start()

    def _run(self) -> None:
        try:
            for piece in self._pieces:
                if self._cancelled.is_set():
                    break
                self._queue.put(piece)
        except BaseException as exc:  # handed to the caller, who answers with it
            self._queue.put(exc)
        finally:
            if isinstance(self._pieces, Generator):
                self._pieces.close()
            self._queue.put(None)

    def get(self, wait_sec: float | None = None) -> str | Generation | Waiting | None:
        """The next piece, None after the last, WAITING when `wait_sec` passed without one;
        raises what the generation raised."""
        try:
            item = self._queue.get(timeout=wait_sec)
        except queue.Empty:
            return WAITING
        if isinstance(item, BaseException):
            raise item
        return item

    def cancel(self) -> None:
        self._cancelled.set()
