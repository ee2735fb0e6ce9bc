"""`el model serve`: named aliases of local models over the Chat Completions and Messages protocols,
behind a key of the project. These tests start the real command on a loopback port; the model is
loaded, and only one request generates (a single token; the generating tests are in
test_before_after.py)."""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from envloop.errors import UserError
from envloop.models.serving.aliases import AliasSettings, parse_models
from tests.conftest import El


@dataclass
class ModelServer:
    """A running `el model serve`, its two base URLs and the key it was started for."""

    proc: subprocess.Popen[str]
    openai_url: str
    key: str

    @property
    def anthropic_url(self) -> str:
        return self.openai_url.removesuffix("/v1")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)


def refusal(path: str, status: int, detail: str) -> dict[str, object]:
    """The body of a refusal: `detail` on every route; the Messages routes also give it in that
    protocol's error shape, which the Anthropic SDK and Claude Code read."""
    if not path.startswith("/v1/messages"):
        return {"detail": detail}
    kinds = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error"}
    return {"type": "error", "error": {"type": kinds[status], "message": detail}, "detail": detail}


TEST_THREADS = 1
"""llama.cpp threads of every model the tests serve. The test run keeps both cores busy (three test
processes on two); llama.cpp's threads wait for each other at every step, so a second one spends
its time waiting for a core: on a busy machine one thread reads a 2,000-token prompt in less wall
time than two, with a third of the CPU time."""


def start_model_server(el: El, *args: str) -> ModelServer:
    """`el model serve --port 0 --threads 1 ARGS` with a new key of the default project; returns once
    the first line (the OpenAI base URL) is printed, which happens after the weights are loaded."""
    key = el.ok("key", "create", "--json").json()["key"]
    threads = ("--threads", str(TEST_THREADS))
    proc = subprocess.Popen(
        [sys.executable, "-m", "envloop", "model", "serve", "--port", "0", *threads, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "ENVLOOP_HOME": str(el.home)},
        cwd=el.cwd,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline().strip()
    if not first.startswith("http://127.0.0.1:"):
        proc.kill()
        raise AssertionError(f"el model serve printed {first!r} and exited {proc.wait()}")
    return ModelServer(proc=proc, openai_url=first, key=key)


@contextlib.contextmanager
def serving_base(root: Path) -> Iterator[ModelServer]:
    """`el model serve --model base` on a fresh home under `root`, stopped cleanly at the end."""
    server = start_model_server(El(home=root / "home", cwd=root), "--model", "base")
    yield server
    assert server.stop() == 0


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ModelServer, El]]:
    root = tmp_path_factory.mktemp("model-serve")
    el = El(home=root / "home", cwd=root)
    server = start_model_server(el, "--model", "base", "--model", "sft", "--set", "sft.temperature=0.2")
    yield server, el
    assert server.stop() == 0


def test_model_options_become_aliases_each_with_its_weights_and_settings(tmp_path: Path) -> None:
    weights = tmp_path / "sft.gguf"
    aliases = parse_models(
        ["base", f"sft={weights}"], ["sft.system_prompt=Answer in one word.", "sft.temperature=0.2"]
    )
    assert [(a.name, a.model_path) for a in aliases] == [("base", None), ("sft", weights)]
    assert aliases[0].settings == AliasSettings()
    assert aliases[1].settings.system_prompt == "Answer in one word."
    assert aliases[1].settings.temperature == 0.2
    assert [a.model_id("smollm2") for a in aliases] == ["smollm2/base", "smollm2/sft"]
    [default] = parse_models([], [])
    assert (default.name, default.model_path) == ("base", None)


@pytest.mark.parametrize(
    ("models", "settings", "message"),
    [
        (["base", "base"], [], "alias 'base' is given twice"),
        (["Base"], [], "alias 'Base': use lower-case letters, digits, '.', '_' or '-' (at most 63)"),
        (["sft="], [], "--model 'sft=': give a GGUF file after '=', or the alias alone"),
        (["base"], ["sft.temperature=0.2"], "--set 'sft.temperature=0.2': no --model gives alias 'sft'"),
        (
            ["base"],
            ["base.temperature"],
            "--set 'base.temperature': expected ALIAS.FIELD=VALUE, e.g. sft.temperature=0.2",
        ),
        (["base"], ["base.colour=red"], "--set 'base.colour=red': unknown setting 'colour' (one of "),
        (["base"], ["base.temperature=hot"], "--set base.temperature: Input should be a valid number"),
        (
            ["base"],
            ["base.max_tokens=0"],
            "--set base.max_tokens: Input should be greater than or equal to 1",
        ),
    ],
)
def test_bad_model_options_are_refused_with_one_line(
    models: list[str], settings: list[str], message: str
) -> None:
    with pytest.raises(UserError) as refused:
        parse_models(models, settings)
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)


def test_el_model_serve_refuses_bad_options_and_missing_weights_with_exit_code_2(
    el: El, tmp_path: Path
) -> None:
    bad = el("model", "serve", "--port", "0", "--model", "base", "--set", "base.temperature=hot")
    assert bad.code == 2
    assert bad.stderr.strip().splitlines()[-1].startswith("el: error: --set base.temperature: ")
    missing = el("model", "serve", "--port", "0", "--model", f"sft={tmp_path / 'none.gguf'}")
    assert missing.code == 2
    assert missing.stderr.strip().splitlines()[-1] == (
        f"el: error: alias 'sft': {tmp_path / 'none.gguf'}: no such model file"
    )
    (tmp_path / "junk.gguf").write_bytes(b"not a model")
    junk = el("model", "serve", "--port", "0", "--model", f"sft={tmp_path / 'junk.gguf'}")
    assert junk.code == 2
    assert junk.stderr.strip().splitlines()[-1] == (
        "el: error: alias 'sft': junk.gguf is not a model llama.cpp can load"
    )


def test_a_port_whose_server_just_stopped_is_free_while_its_clients_still_hold_connections(
    el: El, tmp_path: Path
) -> None:
    """As after `el model serve` is stopped while a worker keeps its connections open: the stopped
    server's side of each waits for the client to close (FIN-WAIT-2). The port is taken again; the
    run gets past it to the weights (junk here, so it ends there without loading a model)."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = str(listener.getsockname()[1])
    with socket.create_connection(("127.0.0.1", int(port))):
        accepted, _ = listener.accept()
        accepted.close()
        listener.close()
        (tmp_path / "junk.gguf").write_bytes(b"not a model")
        again = el("model", "serve", "--port", port, "--model", f"sft={tmp_path / 'junk.gguf'}")
    assert again.code == 2
    assert again.stderr.strip().splitlines()[-1] == (
        "el: error: alias 'sft': junk.gguf is not a model llama.cpp can load"
    )


def test_a_port_in_use_is_refused_with_one_line(el: El, served: tuple[ModelServer, El]) -> None:
    port = served[0].openai_url.removesuffix("/v1").rsplit(":", 1)[1]
    refused = el("model", "serve", "--port", port)
    assert refused.code == 2
    assert refused.stderr.strip().splitlines()[-1] == (
        f"el: error: port {port} on 127.0.0.1 is in use; choose another with --port"
    )


def test_the_endpoint_lists_every_alias_to_both_sdks(served: tuple[ModelServer, El]) -> None:
    server, _ = served
    with openai.OpenAI(base_url=server.openai_url, api_key=server.key, max_retries=0) as client:
        assert [m.id for m in client.models.list()] == ["smollm2/base", "smollm2/sft"]
    with anthropic.Anthropic(base_url=server.anthropic_url, api_key=server.key, max_retries=0) as client:
        assert [m.id for m in client.models.list()] == ["smollm2/base", "smollm2/sft"]


def test_only_a_live_key_of_the_project_is_accepted(served: tuple[ModelServer, El]) -> None:
    server, el = served
    other_project = el.ok("key", "create", "--project", "other", "--json").json()["key"]
    revoked = el.ok("key", "create", "--json").json()
    el.ok("key", "revoke", revoked["id"])
    body = {"model": "smollm2/base", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
    root = server.anthropic_url
    for path in ("/v1/chat/completions", "/v1/messages"):
        missing = httpx.post(root + path, json=body, timeout=60)
        assert missing.status_code == 401
        assert missing.json() == refusal(
            path, 401, "missing credentials: send Authorization: Bearer KEY or x-api-key: KEY"
        )
        for wrong in ("elk_not-a-key", other_project, revoked["key"]):
            for headers in ({"Authorization": f"Bearer {wrong}"}, {"x-api-key": wrong}):
                refused = httpx.post(root + path, json=body, headers=headers, timeout=60)
                assert refused.status_code == 401, (path, headers)
                assert refused.json() == refusal(
                    path, 401, "unknown, revoked or expired key, or a key of another project"
                )
    assert httpx.get(f"{root}/v1/models", timeout=60).status_code == 401
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=server.openai_url, api_key=other_project, max_retries=0).models.list()


def test_an_unknown_alias_is_404_with_one_line_in_both_protocols(served: tuple[ModelServer, El]) -> None:
    server, _ = served
    expected = "unknown model 'smollm2/rl': this endpoint serves smollm2/base, smollm2/sft"
    with openai.OpenAI(base_url=server.openai_url, api_key=server.key, max_retries=0) as client:
        with pytest.raises(openai.NotFoundError) as missing:
            client.chat.completions.create(model="smollm2/rl", messages=[{"role": "user", "content": "hi"}])
        assert missing.value.body == {"detail": expected} or missing.value.body == expected
        assert missing.value.response.json() == {"detail": expected}
    with anthropic.Anthropic(base_url=server.anthropic_url, api_key=server.key, max_retries=0) as client:
        with pytest.raises(anthropic.NotFoundError) as missing_a:
            client.messages.create(
                model="smollm2/rl", max_tokens=8, messages=[{"role": "user", "content": "hi"}], stream=True
            )
        assert missing_a.value.response.json() == refusal("/v1/messages", 404, expected)


@pytest.mark.parametrize(
    ("path", "body", "detail"),
    [
        ("/v1/chat/completions", b"{not json", "the request body is not JSON"),
        ("/v1/messages", b"[1, 2]", "the request body must be a JSON object"),
        ("/v1/chat/completions", {"model": "smollm2/base"}, "messages: Field required"),
        (
            "/v1/chat/completions",
            {"model": "smollm2/base", "messages": []},
            "messages: List should have at least 1 item after validation, not 0",
        ),
        (
            "/v1/chat/completions",
            {"model": "smollm2/base", "messages": [{"role": "user", "content": "hi"}], "temperature": 3},
            "temperature: Input should be less than or equal to 2",
        ),
        (
            "/v1/chat/completions",
            {"model": "smollm2/base", "messages": [{"role": "user", "content": "hi"}], "n": 2},
            "n: Input should be less than or equal to 1",
        ),
        (
            "/v1/chat/completions",
            {"model": "smollm2/base", "messages": [{"role": "robot", "content": "hi"}]},
            "messages.0.role: Input should be 'system', 'developer', 'user', 'assistant' or 'tool'",
        ),
        (
            "/v1/chat/completions",
            {
                "model": "smollm2/base",
                "messages": [{"role": "user", "content": "hi"}],
                "tools": [{"type": "function", "function": {"name": "bash"}}],
                "tool_choice": {"type": "function", "function": {"name": "rm"}},
            },
            "tool_choice names 'rm', which is not among the tools",
        ),
        (
            "/v1/messages",
            {"model": "smollm2/base", "messages": [{"role": "user", "content": "hi"}]},
            "max_tokens: Field required",
        ),
        (
            "/v1/messages",
            {
                "model": "smollm2/base",
                "max_tokens": 8,
                "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}],
            },
            "messages.0.content.str: Input should be a valid string",
        ),
        (
            "/v1/messages",
            {
                "model": "smollm2/base",
                "max_tokens": 8,
                "messages": [{"role": "user", "content": "hi"}],
                "temperature": 1.5,
            },
            "temperature: Input should be less than or equal to 1",
        ),
        (
            "/v1/messages",
            {
                "model": "smollm2/base",
                "max_tokens": 8,
                "messages": [{"role": "user", "content": "hi"}],
                "thinking": {"type": "always"},
            },
            "thinking.type: Input should be 'enabled', 'disabled' or 'adaptive'",
        ),
        (
            "/v1/messages/count_tokens",
            {"model": "smollm2/base", "messages": [{"role": "robot", "content": "hi"}]},
            "messages.0.role: Input should be 'user', 'assistant' or 'system'",
        ),
    ],
)
def test_a_bad_request_is_400_with_one_line(
    served: tuple[ModelServer, El], path: str, body: bytes | dict[str, object], detail: str
) -> None:
    server, _ = served
    headers = {"Authorization": f"Bearer {server.key}", "Content-Type": "application/json"}
    url = server.anthropic_url + path
    if isinstance(body, bytes):
        refused = httpx.post(url, content=body, headers=headers, timeout=60)
    else:
        refused = httpx.post(url, json=body, headers=headers, timeout=60)
    assert refused.status_code == 400
    assert refused.json() == refusal(path, 400, detail)


# What Claude Code 2.1.285 sends (read from its requests), cut down to one tool: system blocks with
# cache_control, a mid-conversation system turn, thinking, context management, an effort level,
# metadata, `?beta=true` and the anthropic-beta header.
CLAUDE_CODE_HEADERS = {
    "anthropic-version": "2023-06-01",
    "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27",
    "x-app": "cli",
}


def claude_code_body(mid_conversation_system: bool = True) -> dict[str, object]:
    system_turn = {"role": "system", "content": [{"type": "text", "text": "# Environment\nPlatform: linux"}]}
    return {
        "model": "smollm2/base",
        "system": [
            {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.285;"},
            {"type": "text", "text": "You are an agent.", "cache_control": {"type": "ephemeral"}},
        ],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Create a file named done."}]},
            *([system_turn] if mid_conversation_system else []),
        ],
        "tools": [
            {
                "name": "Bash",
                "description": "Executes a bash command and returns its output.",
                "input_schema": {
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "type": "object",
                    "properties": {"command": {"type": "string"}},
                    "required": ["command"],
                    "additionalProperties": False,
                },
            }
        ],
        "thinking": {"type": "adaptive"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "output_config": {"effort": "high"},
        "metadata": {"user_id": '{"session_id": "s"}'},
    }


def count_tokens(server: ModelServer, body: dict[str, object]) -> int:
    counted = httpx.post(
        f"{server.anthropic_url}/v1/messages/count_tokens?beta=true",
        json=body,
        headers={"x-api-key": server.key, **CLAUDE_CODE_HEADERS},
        timeout=60,
    )
    assert counted.status_code == 200, counted.text
    assert list(counted.json()) == ["input_tokens"]
    tokens: int = counted.json()["input_tokens"]
    return tokens


def test_count_tokens_counts_the_prompt_the_model_reads_tools_and_system_turns_included(
    served: tuple[ModelServer, El],
) -> None:
    server, _ = served
    with anthropic.Anthropic(base_url=server.anthropic_url, api_key=server.key, max_retries=0) as client:
        short = client.messages.count_tokens(
            model="smollm2/base", messages=[{"role": "user", "content": "hi"}]
        )
        longer = client.messages.count_tokens(
            model="smollm2/base", messages=[{"role": "user", "content": "hi" + " hi" * 50}]
        )
        with pytest.raises(anthropic.NotFoundError):
            client.messages.count_tokens(model="smollm2/rl", messages=[{"role": "user", "content": "hi"}])
    assert short.input_tokens > 0 and longer.input_tokens == short.input_tokens + 50
    with_system_turn = count_tokens(server, claude_code_body())
    without = count_tokens(server, claude_code_body(mid_conversation_system=False))
    without_tools = count_tokens(server, {**claude_code_body(False), "tools": []})
    assert with_system_turn > without > without_tools > short.input_tokens
    refused = httpx.post(
        f"{server.anthropic_url}/v1/messages/count_tokens", json=claude_code_body(), timeout=60
    )
    assert refused.status_code == 401


def test_a_claude_code_request_is_answered_as_a_stream_whose_usage_matches_the_count(
    served: tuple[ModelServer, El],
) -> None:
    server, _ = served
    body = {**claude_code_body(), "max_tokens": 1, "stream": True, "temperature": 0}
    with httpx.stream(
        "POST",
        f"{server.anthropic_url}/v1/messages?beta=true",
        json=body,
        headers={"x-api-key": server.key, **CLAUDE_CODE_HEADERS},
        timeout=120,
    ) as response:
        assert response.status_code == 200
        lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    events = [json.loads(line.removeprefix("data: ")) for line in lines]
    kinds = [e["type"] for e in events if e["type"] != "ping"]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert set(kinds[1:-2]) <= {"content_block_start", "content_block_delta", "content_block_stop"}
    delta = next(e for e in events if e["type"] == "message_delta")
    assert delta["delta"]["stop_reason"] in ("max_tokens", "tool_use", "end_turn")
    counted = count_tokens(server, claude_code_body())
    assert events[0]["message"]["usage"]["input_tokens"] == delta["usage"]["input_tokens"] == counted
    assert not any(block.get("type") == "thinking" for e in events for block in [e.get("content_block", {})])


def test_a_prompt_beyond_the_context_is_refused_in_the_protocols_shape_never_cut(
    served: tuple[ModelServer, El],
) -> None:
    server, _ = served
    body = {"model": "smollm2/base", "messages": [{"role": "user", "content": "word " * 3000}]}
    tokens = count_tokens(server, body)
    assert tokens > 2048
    detail = (
        f"prompt is too long: {tokens} tokens > 2047 maximum (the context of smollm2/base is 2048 "
        "tokens; serve it with a larger base.context_tokens)"
    )
    headers = {"x-api-key": server.key}
    for stream in (False, True):
        refused = httpx.post(
            f"{server.anthropic_url}/v1/messages",
            json={**body, "max_tokens": 8, "stream": stream},
            headers=headers,
            timeout=60,
        )
        assert refused.status_code == 400
        assert refused.json() == refusal("/v1/messages", 400, detail)
    chat = httpx.post(
        f"{server.openai_url}/chat/completions",
        json={**body, "max_tokens": 8},
        headers={"Authorization": f"Bearer {server.key}"},
        timeout=60,
    )
    assert chat.status_code == 400 and chat.json() == {"detail": detail}
    client = anthropic.Anthropic(base_url=server.anthropic_url, api_key=server.key, max_retries=0)
    with client, pytest.raises(anthropic.BadRequestError, match="prompt is too long"):
        client.messages.create(
            model="smollm2/base", max_tokens=8, messages=[{"role": "user", "content": "word " * 3000}]
        )
