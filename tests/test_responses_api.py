"""The OpenAI Responses API (`POST /v1/responses`) in the scripted endpoint and in `el model serve`,
read by the official `openai` SDK: whole and streamed answers (the SDK's stream helper checks the
order and identity of every event), function tools, function-call outputs sent back, usage, the
output limit and errors. Codex-like agents are tested offline against these two servers."""

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from envloop.testing import Reply, ScriptedServer, ScriptedToolCall
from tests.test_model_serve import ModelServer, serving_base

BASH = {
    "type": "function",
    "name": "bash",
    "description": "Run a shell command.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
}
# Codex declares tools of other kinds beside its functions; a server without them leaves them out.
WEB_SEARCH = {"type": "web_search"}


def client(url: str, key: str = "k") -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key=key, max_retries=0, timeout=120)


def test_a_whole_scripted_answer_carries_text_usage_and_the_request_as_sent() -> None:
    with ScriptedServer([Reply(text="four", input_tokens=7, output_tokens=1)]) as server:
        answer = client(server.openai_url).responses.create(
            model="team-model/sft", input="What is 2+2?", instructions="Answer in one word."
        )
    assert answer.output_text == "four" and answer.status == "completed"
    assert answer.model == "team-model/sft"
    assert answer.usage is not None
    assert (answer.usage.input_tokens, answer.usage.output_tokens, answer.usage.total_tokens) == (7, 1, 8)
    [received] = server.received
    assert (received.protocol, received.path) == ("openai-responses", "/v1/responses")
    assert received.system == "Answer in one word." and received.prompt == "What is 2+2?"


def test_a_streamed_scripted_answer_with_reasoning_and_a_call_passes_the_sdks_strict_stream_helper() -> None:
    call = ScriptedToolCall(name="bash", arguments={"command": "ls -la /app"}, id="call_7")
    with ScriptedServer(
        [Reply(text="Looking.", reasoning="list the files first", tool_calls=[call])]
    ) as server:
        sdk = client(server.openai_url)
        with sdk.responses.stream(model="m", input="What is there?", tools=[BASH, WEB_SEARCH]) as stream:
            kinds = [event.type for event in stream]
            final = stream.get_final_response()
    assert [item.type for item in final.output] == ["reasoning", "message", "function_call"]
    reasoning, message, function_call = final.output
    assert reasoning.type == "reasoning" and reasoning.summary[0].text == "list the files first"
    assert message.type == "message" and final.output_text == "Looking."
    assert function_call.type == "function_call"
    assert (function_call.call_id, function_call.name) == ("call_7", "bash")
    assert json.loads(function_call.arguments) == {"command": "ls -la /app"}
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert kinds.count("response.function_call_arguments.delta") == 2  # the arguments in halves


def test_function_call_outputs_sent_back_reach_the_responder_as_items() -> None:
    with ScriptedServer([Reply(text="There is one file.")]) as server:
        client(server.openai_url).responses.create(
            model="m",
            input=[
                {"role": "user", "content": [{"type": "input_text", "text": "What is there?"}]},
                {
                    "type": "function_call",
                    "call_id": "call_1",
                    "name": "bash",
                    "arguments": '{"command":"ls"}',
                },
                {"type": "function_call_output", "call_id": "call_1", "output": "done.txt"},
            ],
            tools=[BASH],
        )
    [received] = server.received
    assert received.prompt == "What is there?"
    assert [m.get("type", "message") for m in received.messages] == [
        "message",
        "function_call",
        "function_call_output",
    ]
    assert received.messages[2]["output"] == "done.txt"


def test_an_answer_cut_by_the_output_limit_is_incomplete_streamed_or_not() -> None:
    with ScriptedServer([Reply(text="a long", stop="length"), Reply(text="a long", stop="length")]) as server:
        sdk = client(server.openai_url)
        whole = sdk.responses.create(model="m", input="Go on.", max_output_tokens=2)
        events = list(sdk.responses.create(model="m", input="Go on.", max_output_tokens=2, stream=True))
    assert whole.status == "incomplete" and whole.incomplete_details is not None
    assert whole.incomplete_details.reason == "max_output_tokens" and whole.output_text == "a long"
    assert events[-1].type == "response.incomplete"
    assert [e.sequence_number for e in events] == list(range(len(events)))


def test_a_scripted_error_is_the_openai_error_shape_the_sdk_raises() -> None:
    script = [
        Reply(status=429, error="slow down", headers={"Retry-After": "0"}),
        Reply(status=400, error="bad"),
    ]
    with ScriptedServer(script) as server:
        sdk = client(server.openai_url)
        with pytest.raises(openai.RateLimitError) as limited:
            sdk.responses.create(model="m", input="hi")
        with pytest.raises(openai.BadRequestError) as refused:
            sdk.responses.create(model="m", input="hi", stream=True)
    assert limited.value.message == "Error code: 429 - slow down"
    assert refused.value.body == {
        "message": "bad",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelServer]:
    with serving_base(tmp_path_factory.mktemp("responses-serve")) as server:
        yield server


def test_el_model_serve_answers_a_whole_response_with_its_usage(served: ModelServer) -> None:
    answer = client(served.openai_url, served.key).responses.create(
        model="smollm2/base", input="Say hello.", instructions="Be brief.", max_output_tokens=4, temperature=0
    )
    assert answer.status in ("completed", "incomplete") and answer.model == "smollm2/base"
    assert answer.output_text and answer.usage is not None
    assert answer.usage.input_tokens > 0 and 0 < answer.usage.output_tokens <= 4


def test_el_model_serve_streams_a_function_call_and_reads_its_output_back(served: ModelServer) -> None:
    sdk = client(served.openai_url, served.key)
    conversation: list[dict[str, object]] = [{"role": "user", "content": "List the files."}]
    with sdk.responses.stream(
        model="smollm2/base",
        input=conversation,
        tools=[BASH, WEB_SEARCH],
        tool_choice={"type": "function", "name": "bash"},
        max_output_tokens=24,
        temperature=0,
    ) as stream:
        final = stream.get_final_response()
    [call] = final.output
    assert call.type == "function_call" and call.name == "bash" and call.call_id
    conversation += [
        {"type": "function_call", "call_id": call.call_id, "name": "bash", "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": "done.txt"},
    ]
    events = list(
        sdk.responses.create(
            model="smollm2/base",
            input=conversation,
            tools=[BASH],
            tool_choice="none",
            max_output_tokens=4,
            temperature=0,
            stream=True,
        )
    )
    assert events[0].type == "response.created" and events[-1].type in (
        "response.completed",
        "response.incomplete",
    )
    last = events[-1]
    assert last.type in ("response.completed", "response.incomplete")
    assert last.response.output[0].type == "message" and last.response.usage is not None


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (
            {"model": "smollm2/base", "input": [{"type": "image"}]},
            "input.0: type should be message, function_call, function_call_output or reasoning",
        ),
        (
            {"model": "smollm2/base", "input": "hi", "previous_response_id": "resp_1"},
            "previous_response_id: this endpoint keeps no responses; send the whole conversation",
        ),
        (
            {"model": "smollm2/base", "input": [{"role": "system", "content": "x"}]},
            "input: give at least one message",
        ),
        (
            {"model": "smollm2/rl", "input": "hi"},
            "unknown model 'smollm2/rl': this endpoint serves smollm2/base",
        ),
    ],
)
def test_el_model_serve_refuses_a_bad_response_request_in_the_openai_shape(
    served: ModelServer, body: dict[str, object], detail: str
) -> None:
    refused = httpx.post(
        f"{served.openai_url}/responses",
        json=body,
        headers={"Authorization": f"Bearer {served.key}"},
        timeout=60,
    )
    status = 404 if "unknown model" in detail else 400
    assert refused.status_code == status
    assert refused.json() == {
        "detail": detail,
        "error": {"message": detail, "type": "invalid_request_error", "param": None, "code": None},
    }


def test_el_model_serve_refuses_a_prompt_beyond_its_context_before_the_stream_starts(
    served: ModelServer, tmp_path: Path
) -> None:
    sdk = client(served.openai_url, served.key)
    for stream in (False, True):
        with pytest.raises(openai.BadRequestError) as refused:
            sdk.responses.create(model="smollm2/base", input="word " * 3000, stream=stream)
        assert "prompt is too long" in refused.value.message
