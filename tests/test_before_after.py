"""The docs' "Before and after training" walk-through, offline: one frozen held-out set through
two aliases of a real `el model serve` (SmolLM2-135M-Instruct under llama.cpp; `sft` is the same
weights with its own system prompt) over both protocols, then `el job compare` and the leaderboard.
The official `openai` and `anthropic` SDKs also call the endpoint directly, tool calls and streams
included."""

import json
import time
from collections.abc import Iterator
from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from tests.conftest import EXAMPLES, El, write_profile
from tests.test_model_serve import ModelServer, start_model_server

pytestmark = pytest.mark.slow
SFT_PROMPT = "Answer the question with a single word or number."
WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}


@pytest.fixture
def endpoint(el: El) -> Iterator[ModelServer]:
    server = start_model_server(
        el, "--model", "base", "--model", "sft", "--set", f"sft.system_prompt={SFT_PROMPT}"
    )
    yield server
    assert server.stop() == 0


def test_both_aliases_answer_both_sdks_with_text_streams_and_tool_calls(endpoint: ModelServer) -> None:
    question = [{"role": "user", "content": "What is the weather in Paris?"}]
    with openai.OpenAI(
        base_url=endpoint.openai_url, api_key=endpoint.key, max_retries=0, timeout=120
    ) as client:
        plain = client.chat.completions.create(
            model="smollm2/base",
            messages=[{"role": "user", "content": "What is the capital of France?"}],
            max_tokens=16,
            temperature=0,
        )
        assert "Paris" in (plain.choices[0].message.content or "")
        assert plain.model == "smollm2/base" and plain.usage is not None and plain.usage.completion_tokens > 0
        chunks = list(
            client.chat.completions.create(
                model="smollm2/sft",
                messages=[{"role": "user", "content": "Name a primary colour."}],
                max_tokens=12,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
        assert len(pieces) >= 1 and chunks[-1].usage is not None
        assert chunks[-1].usage.completion_tokens == len(pieces)
        called = client.chat.completions.create(
            model="smollm2/base",
            messages=question,
            tools=[{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}],
            tool_choice="required",
            max_tokens=32,
        )
        [call] = called.choices[0].message.tool_calls or []
        assert called.choices[0].finish_reason == "tool_calls"
        assert call.function.name == "get_weather"
        assert isinstance(json.loads(call.function.arguments)["city"], str)

    with anthropic.Anthropic(
        base_url=endpoint.anthropic_url, api_key=endpoint.key, max_retries=0, timeout=120
    ) as client_a:
        tools = [{"name": "get_weather", "description": "The weather in a city", "input_schema": WEATHER}]
        with client_a.messages.stream(
            model="smollm2/sft",
            max_tokens=48,
            tools=tools,
            tool_choice={"type": "tool", "name": "get_weather"},
            messages=question,
        ) as stream:
            used = stream.get_final_message()
        assert used.stop_reason == "tool_use" and used.model == "smollm2/sft"
        [block] = used.content
        assert block.type == "tool_use" and block.name == "get_weather"
        assert isinstance(block.input["city"], str)
        # The tool's result goes back in the next user turn; the model answers in text.
        answered = client_a.messages.create(
            model="smollm2/base",
            max_tokens=32,
            tools=tools,
            tool_choice={"type": "none"},
            messages=[
                *question,
                {"role": "assistant", "content": [block.model_dump(include={"type", "id", "name", "input"})]},
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": block.id, "content": "Sunny, 24 °C"}],
                },
            ],
        )
        assert answered.stop_reason in ("end_turn", "max_tokens")
        assert answered.content[0].type == "text" and answered.content[0].text
        with client_a.messages.stream(
            model="smollm2/base", max_tokens=12, messages=[{"role": "user", "content": "Say hello."}]
        ) as text_stream:
            streamed = "".join(text_stream.text_stream)
            final = text_stream.get_final_message()
        assert streamed and final.content[0].type == "text" and final.content[0].text == streamed
        assert final.usage.output_tokens > 0


def test_before_and_after_through_two_aliases_over_both_protocols_compare_and_rank(
    el: El, tmp_path: Path, endpoint: ModelServer
) -> None:
    rows = (EXAMPLES / "qa" / "basics.jsonl").read_text().splitlines()[:6]
    heldout = tmp_path / "heldout.jsonl"
    heldout.write_text("\n".join(rows) + "\n")
    el.ok("dataset", "push", str(heldout), "--name", "heldout", "--scorer", "regex")
    refs = []
    for alias in ("base", "sft"):
        for protocol, url, stream in (
            ("openai", endpoint.openai_url, "false"),
            ("anthropic", endpoint.anthropic_url, "true"),
        ):
            params = {
                "MODEL_PROTOCOL": protocol,
                "MODEL_BASE_URL": url,
                "MODEL_NAME": f"smollm2/{alias}",
                "MODEL_API_KEY": endpoint.key,
                "TEMPERATURE": "0",
                "MAX_OUTPUT_TOKENS": "24",
                "STREAM": stream,
            }
            profile = write_profile(tmp_path / f"{alias}-{protocol}.json", params, secret=["MODEL_API_KEY"])
            el.ok("profile", "create", f"team/heldout-{alias}-{protocol}", "1", "--file", str(profile))
            refs.append(f"team/heldout-{alias}-{protocol}@1")
    started = time.monotonic()
    submitted = ["job", "submit", "--dataset", "heldout@1", "--attempts", "1", "--wait", "--json"]
    for ref in refs:
        submitted += ["--profile", ref]
    job = el.ok(*submitted, timeout=900).json()
    print(f"before/after job: 4 profiles x 6 questions in {time.monotonic() - started:.1f} s")
    assert job["status"] == "completed"

    result = el.ok("job", "result", job["id"], "--json").json()["profiles"]
    for ref in refs:
        counts = result[ref]["score_counts"]
        assert (counts["total"], counts["scored"]) == (6, 6), (ref, counts)
    # Greedy decoding of the same prompt: the protocol does not change what an alias answers.
    base_openai, base_anthropic, sft_openai, sft_anthropic = refs
    assert result[base_openai]["score"] == result[base_anthropic]["score"]
    assert result[sft_openai]["score"] == result[sft_anthropic]["score"]

    compared = el.ok(
        "job", "compare", job["id"], "--profile-a", base_openai, "--profile-b", sft_openai, "--json"
    ).json()
    assert compared["n_tasks"] == 6
    assert compared["difference"] == pytest.approx(result[sft_openai]["score"] - result[base_openai]["score"])
    shown = el.ok("job", "compare", job["id"], "--profile-a", base_openai, "--profile-b", sft_openai)
    assert "6" in shown.stdout

    added = el.ok("leaderboard", "add", job["id"], "--json").json()
    assert sorted(row["profile"] for row in added) == sorted(refs)
    board = el.ok("leaderboard", "show", "--dataset", "heldout@1", "--json").json()
    assert sorted((row["profile"], row["model"]) for row in board) == sorted(
        (ref, f"smollm2/{ref.split('-')[1]}") for ref in refs
    )
    assert {row["job_id"] for row in board} == {job["id"]}

    trial = next(
        t
        for t in el.ok("trial", "list", "--job", job["id"], "--json").json()
        if t["profile"] == sft_anthropic
    )
    steps = el.ok("trial", "get", trial["id"], "--steps", "--json").json()["trajectory"]["steps"]
    [model_step] = [s for s in steps if s["kind"] == "model"]
    assert model_step["usage"]["output_tokens"] > 0
    assert endpoint.key not in json.dumps(steps)


def test_a_caller_that_leaves_a_stream_frees_the_model_for_the_next_request(endpoint: ModelServer) -> None:
    """The stream asks for up to 1024 tokens of counting (a minute of generation here); the next
    request is answered within seconds once the first caller hangs up."""
    headers = {"Authorization": f"Bearer {endpoint.key}"}
    counting = {
        "model": "smollm2/base",
        "messages": [{"role": "user", "content": "Count from 1 to 1000, separated by commas."}],
        "max_tokens": 1024,
        "temperature": 0,
        "stream": True,
    }
    with (
        httpx.Client(timeout=120) as http,
        http.stream(
            "POST", f"{endpoint.openai_url}/chat/completions", json=counting, headers=headers
        ) as reply,
    ):
        lines = reply.iter_lines()
        received = [next(lines) for _ in range(4)]
        assert received[0].startswith("data: ")
    started = time.monotonic()
    quick = httpx.post(
        f"{endpoint.openai_url}/chat/completions",
        json={"model": "smollm2/sft", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4},
        headers=headers,
        timeout=120,
    )
    assert quick.status_code == 200 and quick.json()["choices"][0]["message"]["content"]
    assert time.monotonic() - started < 25
