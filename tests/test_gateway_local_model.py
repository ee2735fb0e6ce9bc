"""The model gateway in front of `el model serve`: the official SDKs reach the bundled SmolLM2
through a gateway token over each protocol, streamed and not, with a tool to call, and each call's
recorded step holds the tokens, text and tool calls the SDK saw. Answers are a few tokens long."""

from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from envloop.core.trajectory import ModelStep
from envloop.gateway import GatewaySession, Upstream
from tests.gateway_support import GatewayThread, running_gateway
from tests.test_model_serve import ModelServer, serving_base

pytestmark = pytest.mark.slow
MODEL = "smollm2/base"
PARAMETERS = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
ASK = "List the files in /app."


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelServer]:
    with serving_base(tmp_path_factory.mktemp("gateway-serve")) as server:
        yield server


@pytest.fixture(scope="module")
def gateway() -> Iterator[GatewayThread]:
    with running_gateway(allow_private_upstream=True) as running:
        yield running


def session_for(gateway: GatewayThread, served: ModelServer, protocol: str) -> GatewaySession:
    base_url = served.openai_url if protocol == "openai" else served.anthropic_url
    return gateway.open(Upstream(protocol=protocol, base_url=base_url, api_key=served.key, model=MODEL))


def only_step(gateway: GatewayThread, session: GatewaySession) -> ModelStep:
    [step] = gateway.call(session.steps)
    assert step.error is None and step.http_status == 200 and step.request.model == MODEL
    return step


@pytest.mark.parametrize("stream", [False, True])
def test_chat_completions_through_the_gateway_to_the_local_model(
    gateway: GatewayThread, served: ModelServer, stream: bool
) -> None:
    session = session_for(gateway, served, "openai")
    sdk = openai.OpenAI(base_url=session.base_url, api_key=session.token, max_retries=0, timeout=120)
    request: dict[str, Any] = {
        "model": "whatever-the-agent-likes",
        "messages": [{"role": "user", "content": ASK}],
        "tools": [{"type": "function", "function": {"name": "bash", "parameters": PARAMETERS}}],
        "tool_choice": "required",
        "max_tokens": 24,
        "temperature": 0,
    }
    if stream:
        chunks = list(
            sdk.chat.completions.create(**request, stream=True, stream_options={"include_usage": True})
        )
        usage = chunks[-1].usage
        names = [c.function.name for k in chunks if k.choices for c in k.choices[0].delta.tool_calls or []]
    else:
        completion = sdk.chat.completions.create(**request)
        usage = completion.usage
        names = [c.function.name for c in completion.choices[0].message.tool_calls or []]
    step = only_step(gateway, session)
    assert usage is not None and names == ["bash"]
    assert (step.usage.input_tokens, step.usage.output_tokens) == (
        usage.prompt_tokens,
        usage.completion_tokens,
    )
    assert [c.name for c in step.tool_calls] == names and step.requested_model == "whatever-the-agent-likes"


@pytest.mark.parametrize("stream", [False, True])
def test_responses_through_the_gateway_to_the_local_model(
    gateway: GatewayThread, served: ModelServer, stream: bool
) -> None:
    session = session_for(gateway, served, "openai")
    sdk = openai.OpenAI(base_url=session.base_url, api_key=session.token, max_retries=0, timeout=120)
    request: dict[str, Any] = {
        "model": MODEL,
        "input": ASK,
        "tools": [{"type": "function", "name": "bash", "parameters": PARAMETERS}],
        "tool_choice": "required",
        "max_output_tokens": 24,
        "temperature": 0,
    }
    if stream:
        with sdk.responses.stream(**request) as events:
            final = events.get_final_response()
    else:
        final = sdk.responses.create(**request)
    calls = [item for item in final.output if item.type == "function_call"]
    step = only_step(gateway, session)
    assert final.usage is not None and [c.name for c in calls] == ["bash"]
    assert (step.usage.input_tokens, step.usage.output_tokens) == (
        final.usage.input_tokens,
        final.usage.output_tokens,
    )
    assert [(c.id, c.name) for c in step.tool_calls] == [(c.call_id, c.name) for c in calls]
    assert step.tool_calls[0].raw_arguments == calls[0].arguments


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_messages_through_the_gateway_to_the_local_model(
    gateway: GatewayThread, served: ModelServer, stream: bool
) -> None:
    session = session_for(gateway, served, "anthropic")
    sdk = anthropic.Anthropic(base_url=session.base_url, api_key=session.token, max_retries=0, timeout=120)
    request: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 24,
        "messages": [{"role": "user", "content": ASK}],
        "tools": [{"name": "bash", "input_schema": PARAMETERS}],
        "tool_choice": {"type": "any"},
    }
    if stream:  # the stream helper takes sampling settings as extras
        with sdk.messages.stream(**request, extra_body={"temperature": 0}) as events:
            message = events.get_final_message()
    else:
        message = sdk.messages.create(**request, extra_body={"temperature": 0})
    uses = [block for block in message.content if block.type == "tool_use"]
    step = only_step(gateway, session)
    assert [u.name for u in uses] == ["bash"]
    assert (step.usage.input_tokens, step.usage.output_tokens) == (
        message.usage.input_tokens,
        message.usage.output_tokens,
    )
    assert [(c.id, c.name) for c in step.tool_calls] == [(u.id, u.name) for u in uses]
    counted = sdk.messages.count_tokens(model=MODEL, messages=request["messages"], tools=request["tools"])
    assert counted.input_tokens == message.usage.input_tokens
    assert len(gateway.call(session.steps)) == 1  # counting is not a model call
    assert served.key not in step.model_dump_json()
