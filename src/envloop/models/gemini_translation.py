"""The Gemini API (generateContent, streamGenerateContent) translated to and from OpenAI Chat
Completions: what lets a Gemini-speaking agent (Gemini CLI) reach a model served over Chat
Completions, through the model gateway or `el model serve`.

Request: `systemInstruction` becomes the system message; each of `contents` a message (`model`
turns are the assistant's, their `functionCall` parts its tool calls; `functionResponse` parts
become tool messages answering the call of that id, or the earliest unanswered one of that name);
`tools[].functionDeclarations` become function tools (the older OpenAPI `parameters`, with its
upper-case types, or `parametersJsonSchema`); `generationConfig` and `toolConfig` their Chat
equivalents. What Chat Completions cannot carry (Google's own tools such as search, inline files,
a response schema) is left out: the model never sees it.

Response: a completion (or its stream of chunks) becomes `GenerateContentResponse`s: text and
reasoning (as `thought` parts) as they come, each tool call as a whole `functionCall` part, then
the finish reason and `usageMetadata` on the last chunk, as Gemini's own stream ends.
"""

import json
from collections.abc import Iterable
from typing import Any

from envloop.models.base import json_count, json_object, json_text

_FINISH = {"stop": "STOP", "length": "MAX_TOKENS", "tool_calls": "STOP", "content_filter": "SAFETY"}
_TOOL_CHOICE = {"AUTO": "auto", "ANY": "required", "NONE": "none"}
_SCHEMA_TYPES = {"STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT", "NULL"}
_GENERATION = (
    ("temperature", "temperature"),
    ("topP", "top_p"),
    ("maxOutputTokens", "max_tokens"),
    ("stopSequences", "stop"),
    ("seed", "seed"),
    ("presencePenalty", "presence_penalty"),
    ("frequencyPenalty", "frequency_penalty"),
)


def _parts(content: Any) -> list[dict[str, Any]]:
    parts = json_object(content).get("parts")
    return [json_object(p) for p in parts] if isinstance(parts, list) else []


def _text(parts: Iterable[dict[str, Any]], between: str = "") -> str:
    """The text parts' text, thoughts left out; a user's parts are separate texts (`between`), a
    model's the pieces of one answer."""
    return between.join(
        json_text(p.get("text")) for p in parts if p.get("thought") is not True and json_text(p.get("text"))
    )


def _openai_schema(schema: Any) -> Any:
    """An OpenAPI schema of Gemini's (`"type": "OBJECT"`) as JSON Schema (`"type": "object"`)."""
    if isinstance(schema, list):
        return [_openai_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    converted = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, str) and value in _SCHEMA_TYPES:
            converted[key] = value.lower()
        else:
            converted[key] = _openai_schema(value)
    return converted


def _tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    tools = []
    for tool in map(json_object, body.get("tools") or []):
        for declaration in map(json_object, tool.get("functionDeclarations") or []):
            parameters = declaration.get("parametersJsonSchema")
            if parameters is None:
                parameters = _openai_schema(declaration.get("parameters"))
            function: dict[str, Any] = {
                "name": json_text(declaration.get("name")),
                "parameters": parameters
                if isinstance(parameters, dict)
                else {"type": "object", "properties": {}},
            }
            if json_text(declaration.get("description")):
                function["description"] = declaration["description"]
            tools.append({"type": "function", "function": function})
    return tools


def _tool_output(response: Any) -> str:
    """A function's response as the tool message's text: its `output` when that is all it holds."""
    response = json_object(response)
    if set(response) == {"output"} and isinstance(response["output"], str):
        return str(response["output"])
    return json.dumps(response)


class _Conversation:
    """Gemini's contents as Chat messages, with each call's id kept for the response to it."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self._unanswered: list[tuple[str, str]] = []  # (id, name) of the calls made so far

    def model_turn(self, turn: int, parts: list[dict[str, Any]]) -> None:
        calls = []
        for index, part in enumerate(parts):
            call = part.get("functionCall")
            if not isinstance(call, dict):
                continue
            call_id = json_text(call.get("id")) or f"call_{turn}_{index}"
            name = json_text(call.get("name"))
            self._unanswered.append((call_id, name))
            arguments = json.dumps(json_object(call.get("args")))
            calls.append(
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
            )
        text = _text(parts)
        if not text and not calls:
            return
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = calls
        self.messages.append(message)

    def user_turn(self, parts: list[dict[str, Any]]) -> None:
        for part in parts:
            response = part.get("functionResponse")
            if isinstance(response, dict):
                call_id = self._answer(json_text(response.get("id")), json_text(response.get("name")))
                self.messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": call_id,
                        "content": _tool_output(response.get("response")),
                    }
                )
        text = _text(parts, "\n\n")
        if text:
            self.messages.append({"role": "user", "content": text})

    def _answer(self, call_id: str, name: str) -> str:
        """The id of the call a response answers: its own, else the earliest unanswered of its name."""
        for index, (known, known_name) in enumerate(self._unanswered):
            if known == call_id or (not call_id and known_name == name):
                del self._unanswered[index]
                return known
        return call_id or f"call_{name}"


def chat_request(body: dict[str, Any], model: str, stream: bool) -> dict[str, Any]:
    """A Chat Completions request asking what the Gemini request `body` asks of `model`."""
    conversation = _Conversation()
    system = _text(_parts(body.get("systemInstruction") or body.get("system_instruction")), "\n\n")
    if system:
        conversation.messages.append({"role": "system", "content": system})
    for turn, content in enumerate(map(json_object, body.get("contents") or [])):
        if content.get("role") == "model":
            conversation.model_turn(turn, _parts(content))
        else:
            conversation.user_turn(_parts(content))
    chat: dict[str, Any] = {"model": model, "messages": conversation.messages}
    config = json_object(body.get("generationConfig"))
    for gemini_name, chat_name in _GENERATION:
        if config.get(gemini_name) is not None:
            chat[chat_name] = config[gemini_name]
    tools = _tools(body)
    if tools:
        chat["tools"] = tools
        calling = json_object(json_object(body.get("toolConfig")).get("functionCallingConfig"))
        mode = _TOOL_CHOICE.get(json_text(calling.get("mode")))
        if mode is not None:
            chat["tool_choice"] = mode
    if stream:
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True}
    return chat


def usage_metadata(usage: Any) -> dict[str, int]:
    usage = json_object(usage)
    prompt, completion = json_count(usage.get("prompt_tokens")), json_count(usage.get("completion_tokens"))
    metadata = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": completion,
        "totalTokenCount": json_count(usage.get("total_tokens")) or prompt + completion,
    }
    cached = json_count(json_object(usage.get("prompt_tokens_details")).get("cached_tokens"))
    thoughts = json_count(json_object(usage.get("completion_tokens_details")).get("reasoning_tokens"))
    if cached:
        metadata["cachedContentTokenCount"] = cached
    if thoughts:
        metadata["thoughtsTokenCount"] = thoughts
    return metadata


def _function_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    try:
        args = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        args = {"arguments": arguments}  # the model's text as it came, for the agent to refuse
    return {"functionCall": {"id": call_id, "name": name, "args": args if isinstance(args, dict) else {}}}


def _candidate(parts: list[dict[str, Any]], finish: str | None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = _FINISH.get(finish, "OTHER")
    return candidate


def gemini_response(completion: Any) -> dict[str, Any]:
    """A whole Chat completion as one GenerateContentResponse."""
    completion = json_object(completion)
    choices = completion.get("choices")
    choice = json_object(choices[0]) if isinstance(choices, list) and choices else {}
    message = json_object(choice.get("message"))
    parts: list[dict[str, Any]] = []
    reasoning = json_text(message.get("reasoning_content")) or json_text(message.get("reasoning"))
    if reasoning:
        parts.append({"text": reasoning, "thought": True})
    if json_text(message.get("content")):
        parts.append({"text": message["content"]})
    for call in map(json_object, message.get("tool_calls") or []):
        function = json_object(call.get("function"))
        parts.append(
            _function_call(
                json_text(call.get("id")),
                json_text(function.get("name")),
                json_text(function.get("arguments")),
            )
        )
    if not parts:
        parts.append({"text": ""})
    return {
        "candidates": [_candidate(parts, json_text(choice.get("finish_reason")) or "stop")],
        "usageMetadata": usage_metadata(completion.get("usage")),
        "modelVersion": json_text(completion.get("model")),
        "responseId": json_text(completion.get("id")),
    }


class GeminiChunks:
    """Chat Completions stream chunks turned into Gemini stream chunks, one call to `feed` per
    chunk; `end()` gives the last one (tool calls, finish reason, usage)."""

    def __init__(self) -> None:
        self._calls: dict[int, list[str]] = {}  # index: [id, name, arguments so far]
        self._finish: str | None = None
        self._usage: Any = None
        self._model = ""
        self._id = ""
        self.ended = False

    def _chunk(self, parts: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
        chunk: dict[str, Any] = {"candidates": [_candidate(parts, finish)], "modelVersion": self._model}
        if self._id:
            chunk["responseId"] = self._id
        return chunk

    def feed(self, data: Any) -> list[dict[str, Any]]:
        data = json_object(data)
        self._model = json_text(data.get("model")) or self._model
        self._id = json_text(data.get("id")) or self._id
        if data.get("usage") is not None:
            self._usage = data["usage"]
        out = []
        for choice in map(json_object, data.get("choices") or []):
            delta = json_object(choice.get("delta"))
            reasoning = json_text(delta.get("reasoning_content")) or json_text(delta.get("reasoning"))
            if reasoning:
                out.append(self._chunk([{"text": reasoning, "thought": True}]))
            if json_text(delta.get("content")):
                out.append(self._chunk([{"text": delta["content"]}]))
            for call in map(json_object, delta.get("tool_calls") or []):
                entry = self._calls.setdefault(json_count(call.get("index")), ["", "", ""])
                function = json_object(call.get("function"))
                entry[0] = json_text(call.get("id")) or entry[0]
                entry[1] = json_text(function.get("name")) or entry[1]
                entry[2] += json_text(function.get("arguments"))
            self._finish = json_text(choice.get("finish_reason")) or self._finish
        return out

    def end(self) -> dict[str, Any]:
        """The stream's last chunk; call it once the Chat stream has said `[DONE]`."""
        self.ended = True
        parts = [_function_call(*entry) for _, entry in sorted(self._calls.items())]
        chunk = self._chunk(parts or [{"text": ""}], self._finish or "stop")
        chunk["usageMetadata"] = usage_metadata(self._usage)
        return chunk


def estimated_tokens(body: dict[str, Any]) -> int:
    """countTokens answered without the model: about four characters a token, as Google's own
    estimate for text goes (Chat Completions has no way to ask the model)."""
    return max(1, len(json.dumps(body.get("contents") or body.get("generateContentRequest") or [])) // 4)
