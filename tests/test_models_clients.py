"""Both protocols through the official SDKs against the scripted endpoint: answers, streaming, tool
calls, reasoning, token usage, and exactly the request fields the profile asks for."""

import asyncio
from collections.abc import Iterator

import pytest

from envloop.models import (
    Message,
    ModelError,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ToolSpec,
    close_clients,
    model_client,
    model_settings,
)
from envloop.models.openai_format import parse_tool_call
from envloop.testing import Reply, ScriptedServer, ScriptedToolCall

PROTOCOLS = ["openai", "anthropic"]
BASH = ToolSpec(
    name="bash",
    description="Run a command",
    parameters={"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(api_key="sk-test") as running:
        yield running


def settings_for(server: ScriptedServer, protocol: str, **params: str) -> ModelSettings:
    url = server.openai_url if protocol == "openai" else server.anthropic_url
    base = {"MODEL_PROTOCOL": protocol, "MODEL_BASE_URL": url, "MODEL_NAME": "team-model/sft"}
    return model_settings({**base, "MODEL_API_KEY": "sk-test", **params})


def complete(settings: ModelSettings, *requests: ModelRequest) -> list[ModelResponse]:
    async def run() -> list[ModelResponse]:
        try:
            client = model_client(settings)
            return [await client.complete(request) for request in requests]
        finally:
            await close_clients()

    return asyncio.run(run())


def ask(text: str, system: str | None = None, tools: list[ToolSpec] | None = None) -> ModelRequest:
    return ModelRequest(messages=[Message(role="user", content=text)], system=system, tools=tools or [])


@pytest.mark.parametrize("stream", ["false", "true"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_answer_comes_back_with_its_token_usage(
    server: ScriptedServer, protocol: str, stream: str
) -> None:
    server.add(Reply(text="The answer is 4", input_tokens=11, output_tokens=5))
    [response] = complete(settings_for(server, protocol, STREAM=stream), ask("What is 2+2?"))
    assert response.text == "The answer is 4"
    assert response.stop == "end"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (11, 5)
    assert response.model == "team-model/sft"
    assert response.attempts == 1
    [received] = server.received
    assert received.protocol == protocol
    assert received.prompt == "What is 2+2?"
    assert received.stream is (stream == "true")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_requests_are_not_streamed_unless_the_profile_asks(server: ScriptedServer, protocol: str) -> None:
    server.add(Reply(text="ok"))
    complete(settings_for(server, protocol), ask("hi"))
    assert "stream" not in server.received[0].body


def test_openai_requests_carry_only_the_params_the_profile_sets(server: ScriptedServer) -> None:
    server.add(Reply(text="a"), Reply(text="b"))
    complete(settings_for(server, "openai"), ask("plain", system="Be brief."))
    tuned = settings_for(
        server, "openai", TEMPERATURE="0", MAX_OUTPUT_TOKENS="256", TOP_P="0.9", REASONING_EFFORT="low"
    )
    complete(tuned, ask("tuned"))
    plain, sent = (r.body for r in server.received)
    assert set(plain) == {"model", "messages"}
    assert plain["messages"][0] == {"role": "system", "content": "Be brief."}
    assert plain["model"] == "team-model/sft"
    assert (sent["temperature"], sent["max_tokens"], sent["top_p"]) == (0.0, 256, 0.9)
    assert sent["reasoning_effort"] == "low"


def test_anthropic_requests_map_effort_and_require_max_tokens(server: ScriptedServer) -> None:
    server.add(Reply(text="a"), Reply(text="b"), Reply(text="c"))
    complete(settings_for(server, "anthropic"), ask("plain", system="Be brief."))
    complete(settings_for(server, "anthropic", REASONING_EFFORT="medium", TEMPERATURE="0.5"), ask("tuned"))
    complete(
        settings_for(server, "anthropic", STREAM="true", TEMPERATURE="0.5", TOP_P="0.9"), ask("streamed")
    )
    plain, sent, streamed = (r.body for r in server.received)
    assert set(plain) == {"model", "messages", "max_tokens", "system"}
    assert (plain["max_tokens"], plain["system"]) == (1024, "Be brief.")
    assert sent["output_config"] == {"effort": "medium"}
    assert sent["temperature"] == 0.5
    assert "reasoning_effort" not in sent
    assert (streamed["stream"], streamed["temperature"], streamed["top_p"]) == (True, 0.5, 0.9)


@pytest.mark.parametrize("stream", ["false", "true"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_tool_calls_round_trip_in_each_protocols_shape(
    server: ScriptedServer, protocol: str, stream: str
) -> None:
    call = ScriptedToolCall(name="bash", arguments={"command": "ls -la /app"})
    server.add(
        Reply(text="Let me look.", reasoning="I should list files.", tool_calls=[call]), Reply(text="Done")
    )
    settings = settings_for(server, protocol, STREAM=stream)

    async def loop() -> tuple[ModelResponse, ModelResponse]:
        try:
            client = model_client(settings)
            first = await client.complete(ask("List the files", tools=[BASH]))
            [tool_call] = first.tool_calls
            result = Message(role="tool", tool_call_id=tool_call.id, content="a.txt\nb.txt")
            history = [Message(role="user", content="List the files"), first.message, result]
            return first, await client.complete(ModelRequest(messages=history, tools=[BASH]))
        finally:
            await close_clients()

    first, second = asyncio.run(loop())
    assert first.stop == "tool_calls"
    assert first.text == "Let me look."
    assert first.reasoning == "I should list files."
    assert [(c.name, c.arguments) for c in first.tool_calls] == [("bash", {"command": "ls -la /app"})]
    assert second.text == "Done"
    offered, answered = (r.body for r in server.received)
    if protocol == "openai":
        assert offered["tools"][0]["function"]["name"] == "bash"
        assert answered["messages"][1]["tool_calls"][0]["function"]["name"] == "bash"
        assert answered["messages"][2] == {
            "role": "tool",
            "tool_call_id": first.tool_calls[0].id,
            "content": "a.txt\nb.txt",
        }
    else:
        assert offered["tools"][0]["input_schema"] == BASH.parameters
        thinking, text, tool_use = answered["messages"][1]["content"]
        assert thinking["signature"] == "scripted-signature"  # thinking goes back verbatim
        assert (text["text"], tool_use["name"]) == ("Let me look.", "bash")
        assert answered["messages"][2] == {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": first.tool_calls[0].id, "content": "a.txt\nb.txt"}
            ],
        }


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_answer_cut_by_the_token_limit_says_length(server: ScriptedServer, protocol: str) -> None:
    server.add(Reply(text="The answer is", stop="length"))
    [response] = complete(settings_for(server, protocol, MAX_OUTPUT_TOKENS="3"), ask("Explain"))
    assert response.stop == "length"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_key_is_sent_as_a_bearer_credential(server: ScriptedServer, protocol: str) -> None:
    server.add(Reply(text="ok"))
    complete(settings_for(server, protocol), ask("hi"))
    assert server.received[0].headers["authorization"] == "Bearer sk-test"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_without_a_key_no_credential_is_sent_not_even_the_workers_own(
    protocol: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_ADMIN_KEY", "OPENAI_ORG_ID"):
        monkeypatch.setenv(name, f"host-{name.lower()}")
    with ScriptedServer([Reply(text="ok")]) as server:
        settings = settings_for(server, protocol).model_copy(update={"api_key": ""})
        [response] = complete(settings, ask("hi"))
    assert response.text == "ok"
    headers = server.received[0].headers
    assert "authorization" not in headers and "x-api-key" not in headers
    assert not any(value.startswith("host-") for value in headers.values())


def test_compatible_servers_reasoning_field_is_kept(server: ScriptedServer) -> None:
    server.add(Reply(text="4", reasoning="2 and 2 make 4"))
    [response] = complete(settings_for(server, "openai"), ask("2+2?"))
    assert response.reasoning == "2 and 2 make 4"


def test_tool_arguments_that_are_not_json_are_reported_not_dropped() -> None:
    call = parse_tool_call("c1", "bash", '{"command": "ls"')
    assert call.arguments == {}
    assert call.raw_arguments == '{"command": "ls"'
    assert call.arguments_error is not None and call.arguments_error.startswith("not JSON")


def test_the_scripted_endpoint_says_when_its_script_is_exhausted_and_records_everything() -> None:
    with ScriptedServer([Reply(text="only one")]) as server:
        settings = settings_for(server, "openai", MAX_RETRIES="0").model_copy(update={"api_key": ""})
        first = complete(settings, ask("one"))[0]
        with pytest.raises(ModelError, match="the script has no reply left for request 2"):
            complete(settings, ask("two"))
    assert first.text == "only one"
    assert [r.prompt for r in server.received] == ["one", "two"]
