"""`el model serve`: named aliases of local models over the Chat Completions and Messages protocols,
behind a key of the project. These tests start the real command on a loopback port; the model is
loaded but none of them generates text (the generating tests are in test_before_after.py)."""

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from envloop.models.serving import AliasSettings, parse_models
from envloop.services.errors import UserError
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


def start_model_server(el: El, *args: str) -> ModelServer:
    """`el model serve --port 0 ARGS` with a new key of the default project; returns once the
    first line (the OpenAI base URL) is printed, which happens after the weights are loaded."""
    key = el.ok("key", "create", "--json").json()["key"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "envloop", "model", "serve", "--port", "0", *args],
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
        assert missing.json() == {
            "detail": "missing credentials: send Authorization: Bearer KEY or x-api-key: KEY"
        }
        for wrong in ("elk_not-a-key", other_project, revoked["key"]):
            for headers in ({"Authorization": f"Bearer {wrong}"}, {"x-api-key": wrong}):
                refused = httpx.post(root + path, json=body, headers=headers, timeout=60)
                assert refused.status_code == 401, (path, headers)
                assert refused.json() == {
                    "detail": "unknown, revoked or expired key, or a key of another project"
                }
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
        assert missing_a.value.response.json() == {"detail": expected}


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
    assert refused.json() == {"detail": detail}
