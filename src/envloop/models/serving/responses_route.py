"""POST /v1/responses: the OpenAI Responses API over the engine, streamed or not.

The request's `input` becomes the engine's Chat Completions shape: `instructions` lead as the system
turn, message items keep their role (`developer` reads as system), `function_call` items become
the assistant's tool calls and `function_call_output` items tool messages. Reasoning items that a
client sends back are skipped (this model writes none). Function tools are offered to the model;
other tool types (web search, shell, custom grammar tools, ...) are left out, as a server without
them would, so agents that declare them still run. This endpoint keeps no responses:
`previous_response_id` is refused, and clients send the whole conversation (as `store: false`
clients do).
"""

from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Discriminator, Field, Tag

from envloop.models.serving.engine import ChatCall, Generation, ServingError, ToolMode, Waiting
from envloop.models.serving.responses_builder import ResponseBuilder, usage_object


class InputText(BaseModel):
    type: Literal["input_text", "output_text"]
    text: str


class MessageItem(BaseModel):
    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "developer"]
    content: str | list[InputText]


class FunctionCallItem(BaseModel):
    type: Literal["function_call"]
    call_id: str
    name: str = Field(min_length=1)
    arguments: str = ""


class FunctionCallOutputItem(BaseModel):
    type: Literal["function_call_output"]
    call_id: str
    output: str | list[InputText]


class ReasoningItem(BaseModel):
    type: Literal["reasoning"]


def _item_type(item: Any) -> str | None:
    """An item's `type`; a message may leave it out (the SDK's "easy" input message)."""
    if isinstance(item, dict):
        kind = item.get("type", "message")
        return kind if isinstance(kind, str) else None
    return getattr(item, "type", None)


InputItem = Annotated[
    Annotated[MessageItem, Tag("message")]
    | Annotated[FunctionCallItem, Tag("function_call")]
    | Annotated[FunctionCallOutputItem, Tag("function_call_output")]
    | Annotated[ReasoningItem, Tag("reasoning")],
    Discriminator(
        _item_type,
        custom_error_type="item_type",
        custom_error_message="type should be message, function_call, function_call_output or reasoning",
    ),
]


def _as_items(given: Any) -> Any:
    """A string input is one user message."""
    return [{"type": "message", "role": "user", "content": given}] if isinstance(given, str) else given


class FunctionTool(BaseModel):
    type: Literal["function"]
    name: str = Field(min_length=1, max_length=64)
    description: str | None = None
    parameters: dict[str, Any] | None = None


class NamedFunction(BaseModel):
    type: Literal["function"]
    name: str


class ResponsesRequest(BaseModel):
    model: str
    input: Annotated[list[InputItem], BeforeValidator(_as_items)]
    instructions: str | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: Literal["auto", "none", "required"] | NamedFunction | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    max_output_tokens: int | None = Field(default=None, ge=1)
    parallel_tool_calls: bool | None = None
    metadata: dict[str, str] | None = None
    previous_response_id: str | None = None
    stream: bool = False

    def function_tools(self) -> list[FunctionTool]:
        return [FunctionTool.model_validate(t) for t in self.tools or [] if t.get("type") == "function"]


def _text(content: str | list[InputText]) -> str:
    return content if isinstance(content, str) else "".join(part.text for part in content)


def _messages(request: ResponsesRequest) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if request.instructions:
        messages.append({"role": "system", "content": request.instructions})
    for item in request.input:
        if isinstance(item, MessageItem):
            role = "system" if item.role == "developer" else item.role
            messages.append({"role": role, "content": _text(item.content)})
        elif isinstance(item, FunctionCallItem):
            call = {
                "id": item.call_id,
                "type": "function",
                "function": {"name": item.name, "arguments": item.arguments},
            }
            previous = messages[-1] if messages else None
            if previous is not None and previous["role"] == "assistant":
                previous.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif isinstance(item, FunctionCallOutputItem):
            messages.append({"role": "tool", "tool_call_id": item.call_id, "content": _text(item.output)})
    if not messages or all(m["role"] == "system" for m in messages):
        raise ServingError(400, "input: give at least one message")
    return messages


def chat_call(request: ResponsesRequest) -> ChatCall:
    if request.previous_response_id is not None:
        raise ServingError(
            400, "previous_response_id: this endpoint keeps no responses; send the whole conversation"
        )
    choice = request.tool_choice
    mode: ToolMode = "named" if isinstance(choice, NamedFunction) else (choice or "auto")
    tools = [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description or "",
                "parameters": tool.parameters or {"type": "object", "properties": {}},
            },
        }
        for tool in request.function_tools()
    ]
    return ChatCall(
        messages=_messages(request),
        tools=tools,
        tool_mode=mode,
        tool_name=choice.name if isinstance(choice, NamedFunction) else None,
        temperature=request.temperature,
        top_p=request.top_p,
        max_tokens=request.max_output_tokens,
    )


def new_builder(request: ResponsesRequest) -> ResponseBuilder:
    echo = request.model_dump(
        include={"instructions", "tools", "temperature", "top_p", "max_output_tokens", "metadata"},
        exclude_none=True,
    )
    echo["tool_choice"] = request.model_dump(include={"tool_choice"})["tool_choice"]
    if request.parallel_tool_calls is not None:
        echo["parallel_tool_calls"] = request.parallel_tool_calls
    return ResponseBuilder(request.model, echo)


def _finish(builder: ResponseBuilder, generation: Generation) -> list[str]:
    events: list[str] = []
    if not generation.tool_calls and not builder.output:
        events += builder.text("")
    for call in generation.tool_calls:
        events += builder.function_call(call.name, call.arguments)
    usage = usage_object(generation.prompt_tokens, generation.completion_tokens)
    return events + builder.finish(usage, cut_by_limit=generation.finish == "length")


def response(request: ResponsesRequest, generation: Generation) -> dict[str, Any]:
    builder = new_builder(request)
    if generation.text:
        builder.text(generation.text)
    _finish(builder, generation)
    return builder.response()


def response_events(builder: ResponseBuilder, pieces: Iterator[str | Generation | Waiting]) -> Iterator[str]:
    """The stream: created and in_progress at once, text deltas as the model writes, the tool
    calls whole, then completed (or incomplete); `response.in_progress` again for each WAITING."""
    yield from builder.start()
    for piece in pieces:
        if isinstance(piece, Waiting):
            yield builder.keep_alive()
        elif isinstance(piece, str):
            yield from builder.text(piece)
        else:
            yield from _finish(builder, piece)
    # Nothing follows the last event: the Responses API sends no [DONE] sentinel.


def failed_event(builder: ResponseBuilder, status: int, detail: str) -> str:
    """A failure after the stream started, as `response.failed` of the same response."""
    code = "server_error" if status >= 500 else "invalid_request_error"
    return "".join(builder.fail(code, detail))
