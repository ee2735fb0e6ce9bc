"""The model gateway between the official SDKs and the scripted endpoint: each protocol, streamed
and not, with tools, reaches the upstream with the real key and comes back as the SDK expects, and
every call is recorded as a model step that says what the SDK saw (text, tool calls, tokens)."""

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import anthropic
import httpx
import openai
import pytest

from envloop.core.trajectory import ModelStep, Trajectory
from envloop.gateway import GatewaySession, Upstream
from envloop.testing import Reply, ScriptedServer, ScriptedToolCall
from envloop.trajectories.atif import to_atif
from tests.gateway_support import GatewayThread, RawUpstream, running_gateway, sse_head

KEY = "sk-upstream-real-key-7f3a9c"
BASH_CALL = ScriptedToolCall(name="bash", arguments={"command": "ls /app"}, id="call_9")
CHAT_TOOL = {
    "type": "function",
    "function": {
        "name": "bash",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
    },
}
RESPONSES_TOOL = {"type": "function", "name": "bash", "parameters": CHAT_TOOL["function"]["parameters"]}
ANTHROPIC_TOOL = {"name": "bash", "input_schema": CHAT_TOOL["function"]["parameters"]}


@pytest.fixture
def upstream() -> Iterator[ScriptedServer]:
    with ScriptedServer(api_key=KEY) as server:
        yield server


@pytest.fixture
def gateway() -> Iterator[GatewayThread]:
    with running_gateway(allow_private_upstream=True) as running:
        yield running


def openai_session(
    gateway: GatewayThread, server: ScriptedServer, model: str | None = None
) -> GatewaySession:
    return gateway.open(Upstream(protocol="openai", base_url=server.openai_url, api_key=KEY, model=model))


def steps(gateway: GatewayThread, session: GatewaySession) -> list[ModelStep]:
    return gateway.call(session.steps)


def answer(**extra: object) -> Reply:
    return Reply(text="Listing it.", tool_calls=[BASH_CALL], input_tokens=31, output_tokens=12, **extra)


@pytest.mark.parametrize("stream", [False, True])
def test_chat_completions_reach_the_sdk_whole_and_are_recorded_as_it_saw_them(
    gateway: GatewayThread, upstream: ScriptedServer, stream: bool
) -> None:
    upstream.add(answer())
    session = openai_session(gateway, upstream)
    sdk = openai.OpenAI(base_url=session.base_url, api_key=session.token, max_retries=0)
    request = {
        "model": "team/model",
        "messages": [{"role": "user", "content": "What is in /app?"}],
        "tools": [CHAT_TOOL],
    }
    if stream:
        chunks = list(sdk.chat.completions.create(**request, stream=True))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        arguments = "".join(
            call.function.arguments or ""
            for c in chunks
            if c.choices
            for call in c.choices[0].delta.tool_calls or []
        )
        assert all(c.usage is None for c in chunks)  # the agent did not ask for the usage chunk
    else:
        completion = sdk.chat.completions.create(**request)
        message = completion.choices[0].message
        text, arguments = message.content, message.tool_calls[0].function.arguments
    [step] = steps(gateway, session)
    assert step.text == text == "Listing it."
    assert [(c.id, c.name, c.arguments) for c in step.tool_calls] == [
        ("call_9", "bash", json.loads(arguments))
    ]
    assert (step.usage.input_tokens, step.usage.output_tokens) == (31, 12)
    assert (step.stop, step.http_status, step.error) == ("tool_calls", 200, None)
    assert step.request.endpoint == f"{upstream.openai_url}/chat/completions" and step.request.tools == [
        "bash"
    ]
    [received] = upstream.received
    assert received.headers["authorization"] == f"Bearer {KEY}"
    assert (
        received.body["stream_options"] == {"include_usage": True}
        if stream
        else "stream_options" not in received.body
    )


def test_a_stream_that_asked_for_usage_keeps_its_usage_chunk(
    gateway: GatewayThread, upstream: ScriptedServer
) -> None:
    upstream.add(Reply(text="four", input_tokens=5, output_tokens=1))
    session = openai_session(gateway, upstream)
    sdk = openai.OpenAI(base_url=session.base_url, api_key=session.token, max_retries=0)
    chunks = list(
        sdk.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "2+2?"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[-1].usage is not None and (
        chunks[-1].usage.prompt_tokens,
        chunks[-1].usage.completion_tokens,
    ) == (5, 1)
    [step] = steps(gateway, session)
    assert (step.usage.input_tokens, step.usage.output_tokens) == (5, 1)


@pytest.mark.parametrize("stream", [False, True])
def test_responses_reach_the_sdk_whole_and_are_recorded_as_it_saw_them(
    gateway: GatewayThread, upstream: ScriptedServer, stream: bool
) -> None:
    upstream.add(answer(reasoning="look first"))
    session = openai_session(gateway, upstream)
    sdk = openai.OpenAI(base_url=session.base_url, api_key=session.token, max_retries=0)
    request = {"model": "team/model", "input": "What is in /app?", "tools": [RESPONSES_TOOL]}
    if stream:
        with sdk.responses.stream(**request) as events:
            final = events.get_final_response()
    else:
        final = sdk.responses.create(**request)
    call = next(item for item in final.output if item.type == "function_call")
    [step] = steps(gateway, session)
    assert step.text == final.output_text == "Listing it." and step.reasoning == "look first"
    assert [(c.id, c.name, c.arguments) for c in step.tool_calls] == [
        ("call_9", "bash", json.loads(call.arguments))
    ]
    assert final.usage is not None
    assert (
        (step.usage.input_tokens, step.usage.output_tokens)
        == (final.usage.input_tokens, final.usage.output_tokens)
        == (31, 12)
    )
    assert (step.stop, step.request.protocol, step.request.endpoint) == (
        "tool_calls",
        "openai-responses",
        f"{upstream.openai_url}/responses",
    )


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_messages_reach_the_sdk_whole_and_are_recorded_as_it_saw_them(
    gateway: GatewayThread, upstream: ScriptedServer, stream: bool
) -> None:
    upstream.add(answer(reasoning="look first"))
    session = gateway.open(Upstream(protocol="anthropic", base_url=upstream.anthropic_url, api_key=KEY))
    assert session.base_url == session.anthropic_base_url and not session.base_url.endswith("/v1")
    sdk = anthropic.Anthropic(base_url=session.base_url, api_key=session.token, max_retries=0)
    request = {
        "model": "claude-x",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "What is in /app?"}],
        "tools": [ANTHROPIC_TOOL],
    }
    if stream:
        with sdk.messages.stream(**request) as events:
            message = events.get_final_message()
    else:
        message = sdk.messages.create(**request)
    blocks = {block.type: block for block in message.content}
    [step] = steps(gateway, session)
    assert step.text == blocks["text"].text == "Listing it."
    assert step.reasoning == blocks["thinking"].thinking == "look first"
    tool = blocks["tool_use"]
    assert [(c.id, c.name, c.arguments) for c in step.tool_calls] == [(tool.id, tool.name, tool.input)]
    assert (
        (step.usage.input_tokens, step.usage.output_tokens)
        == (message.usage.input_tokens, message.usage.output_tokens)
        == (31, 12)
    )
    assert (step.stop, step.finish_reason) == ("tool_calls", "tool_use")
    [received] = upstream.received
    assert received.headers["x-api-key"] == KEY and "authorization" not in received.headers


def test_count_tokens_and_the_model_list_pass_through_without_being_model_steps(
    gateway: GatewayThread, upstream: ScriptedServer
) -> None:
    session = gateway.open(Upstream(protocol="anthropic", base_url=upstream.anthropic_url, api_key=KEY))
    sdk = anthropic.Anthropic(base_url=session.base_url, api_key=session.token, max_retries=0)
    counted = sdk.messages.count_tokens(model="m", messages=[{"role": "user", "content": "three words here"}])
    assert counted.input_tokens == 3 and upstream.counted[0].headers["x-api-key"] == KEY
    assert [m.id for m in sdk.models.list()] == ["scripted"]  # the upstream's own list
    assert steps(gateway, session) == []


def test_a_profile_model_is_sent_whatever_the_agent_asks_and_the_step_records_both(
    gateway: GatewayThread, upstream: ScriptedServer
) -> None:
    upstream.add(Reply(text="ok"), Reply(text="ok"))
    session = openai_session(gateway, upstream, model="team/sft")
    sdk = openai.OpenAI(base_url=session.base_url, api_key=session.token, max_retries=0)
    assert [m.id for m in sdk.models.list()] == ["team/sft"]
    sdk.chat.completions.create(model="gpt-cheap", messages=[{"role": "user", "content": "hi"}])
    sdk.chat.completions.create(model="team/sft", messages=[{"role": "user", "content": "hi"}])
    assert [r.model for r in upstream.received] == ["team/sft", "team/sft"]
    first, second = steps(gateway, session)
    assert (first.request.model, first.requested_model) == ("team/sft", "gpt-cheap")
    assert (second.request.model, second.requested_model) == ("team/sft", None)


def test_steps_are_in_the_order_the_calls_began_whatever_order_they_end(
    gateway: GatewayThread, upstream: ScriptedServer
) -> None:
    upstream.add(Reply(text="slow", delay_sec=0.6), Reply(text="fast"))
    session = openai_session(gateway, upstream)
    sdk = openai.OpenAI(base_url=session.base_url, api_key=session.token, max_retries=0)
    slow = threading.Thread(
        target=lambda: sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "one"}])
    )
    slow.start()
    while not upstream.received:
        time.sleep(0.01)
    sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "two"}])
    assert [s.text for s in steps(gateway, session)] == ["fast"]
    slow.join()
    assert [s.text for s in steps(gateway, session)] == ["slow", "fast"]


def test_closing_a_session_revokes_its_token_and_records_the_call_in_progress(
    gateway: GatewayThread, upstream: ScriptedServer
) -> None:
    upstream.add(Reply(text="too late", delay_sec=3))
    session = openai_session(gateway, upstream)
    failures: list[Exception] = []

    def agent() -> None:
        sdk = openai.OpenAI(base_url=session.base_url, api_key=session.token, max_retries=0, timeout=30)
        try:
            sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        except openai.APIError as exc:
            failures.append(exc)

    thread = threading.Thread(target=agent)
    thread.start()
    while not upstream.received:
        time.sleep(0.01)
    gateway.call(session.close)
    [step] = steps(gateway, session)  # at once, without waiting for the upstream
    assert (step.finish_reason, step.error) == ("session_closed", None)
    thread.join(timeout=10)
    assert failures and isinstance(failures[0], openai.APIConnectionError)
    later = httpx.post(
        f"{session.base_url}/chat/completions", headers={"Authorization": f"Bearer {session.token}"}, json={}
    )
    assert later.status_code == 401
    assert len(upstream.received) == 1


def test_an_agent_that_hangs_up_mid_stream_ends_the_upstream_call_and_no_model_failure_is_recorded(
    gateway: GatewayThread,
) -> None:
    upstream_broke = threading.Event()

    def slow_stream(handler: BaseHTTPRequestHandler, body: bytes) -> None:
        sse_head(handler)
        delta = {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"content": "word "}}]}
        try:
            for _ in range(200):
                handler.wfile.write(f"data: {json.dumps(delta)}\n\n".encode())
                handler.wfile.flush()
                time.sleep(0.05)
        except OSError:
            upstream_broke.set()

    with RawUpstream(slow_stream) as upstream:
        session = gateway.open(Upstream(protocol="openai", base_url=upstream.url + "/v1", api_key=KEY))
        with httpx.stream(
            "POST",
            f"{session.base_url}/chat/completions",
            headers={"Authorization": f"Bearer {session.token}"},
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True},
        ) as response:
            next(response.iter_bytes())
        assert upstream_broke.wait(timeout=10)  # the gateway hung up on the upstream in turn
    [step] = steps(gateway, session)
    assert (step.finish_reason, step.error, step.http_status) == ("agent_disconnected", None, 200)
    assert step.text.startswith("word ")


def test_listeners_added_at_runtime_serve_sessions_and_a_trial_listener_serves_only_its_trial(
    gateway: GatewayThread, upstream: ScriptedServer
) -> None:
    upstream.add(Reply(text="a"), Reply(text="b"))
    mine = gateway.open(Upstream(protocol="openai", base_url=upstream.openai_url, api_key=KEY), "trl_mine")
    other = gateway.open(Upstream(protocol="openai", base_url=upstream.openai_url, api_key=KEY), "trl_other")
    sock = socket.socket()
    sock.bind(("127.0.0.2", 0))
    sock.listen()
    listener = gateway.wait(gateway.gateway.add_listener(sock, trial_id="trl_mine"))
    url = listener.base_url("openai")
    assert url == f"http://127.0.0.2:{listener.port}/v1"
    ok = openai.OpenAI(base_url=url, api_key=mine.token, max_retries=0)
    assert (
        ok.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        .choices[0]
        .message.content
        == "a"
    )
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=url, api_key=other.token, max_retries=0).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
    everyone = openai.OpenAI(base_url=other.base_url, api_key=other.token, max_retries=0)
    assert (
        everyone.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        .choices[0]
        .message.content
        == "b"
    )
    gateway.wait(gateway.gateway.remove_listener(listener))
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/models", headers={"Authorization": f"Bearer {mine.token}"})
    assert len(upstream.received) == 2


def test_a_gateway_step_carries_its_status_and_requested_model_into_atif_and_old_steps_still_load(
    gateway: GatewayThread, upstream: ScriptedServer
) -> None:
    upstream.add(Reply(text="ok"))
    session = openai_session(gateway, upstream, model="team/sft")
    openai.OpenAI(base_url=session.base_url, api_key=session.token, max_retries=0).chat.completions.create(
        model="gpt-cheap", messages=[{"role": "user", "content": "hi"}]
    )
    [step] = steps(gateway, session)
    trajectory = Trajectory(trial_id="trl_x", runner="envloop/shell@1", agent="command", started_at=step.at)
    trajectory.steps.append(step)
    [agent] = to_atif(trajectory)["steps"]
    assert (agent["extra"]["http_status"], agent["extra"]["requested_model"]) == (200, "gpt-cheap")
    stored = step.model_dump(mode="json", exclude={"http_status", "requested_model", "truncated"})
    old = ModelStep.model_validate(stored)  # a step written before these fields existed
    assert (old.http_status, old.requested_model, old.truncated) == (None, None, False)
