"""Claude Code against `el model serve`: the real CLI (installed from the npm registry into the
trial, as in test_claude_code.py) runs a job's task against the bundled SmolLM2-135M-Instruct over
the Messages protocol, on this machine, with no scripted endpoint in between.

The model is far too small to solve anything; what is checked is that the protocol path holds:
the CLI inside the sandbox reaches the model through the worker's gateway with a token of the
trial's own, the trial ends in a verdict reached through the agent, its trajectory holds the
model's turns as the real endpoint answered them, and the endpoint's key appears nowhere.

The profile offers the model Claude Code's Bash tool alone (`CLAUDE_CODE_TOOLS`), as one would for
a model this small: its prompt (system text and that tool's definition) is then about 2,400 tokens
for this model instead of about 9,200 with every tool, so the alias gets a 4,096-token context, and
a 48-token cap per answer with a one-turn budget keeps the run bounded: the CLI runs the command the
model asks for and stops before sending its output back, so every prompt is Claude Code's own,
whatever the command printed (with two turns, a command's usage text once carried the second prompt
past the context, and the trial ended in a model error). A tool result sent back to `el model
serve` over the Messages protocol is checked in test_before_after.py. Reading that prompt still
takes this 135M model most of a minute on a busy machine: the test prints how long the trial took.
That the agent offers every tool by default, and exactly the ones named otherwise, is checked
against a scripted endpoint (test_claude_code.py)."""

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from envloop.agents.claude_code import DEFAULT_VERSION
from tests.conftest import El, make_task, write_profile
from tests.test_model_serve import ModelServer, start_model_server

pytestmark = pytest.mark.slow


@pytest.fixture
def endpoint(el: El) -> Iterator[ModelServer]:
    server = start_model_server(
        el, "--model", "base", "--set", "base.context_tokens=4096", "--set", "base.max_tokens=48"
    )
    yield server
    assert server.stop() == 0


@pytest.mark.timeout(2400)
def test_claude_code_runs_a_job_against_the_local_endpoint_to_a_verdict(
    el: El, tmp_path: Path, endpoint: ModelServer
) -> None:
    make_task(tmp_path / "tasks", "hello", solve="touch done")
    el.ok("dataset", "push", str(tmp_path / "tasks"), "--name", "local-cc")
    params = {
        "AGENT_NAME": "claude-code",
        "AGENT_VERSION": DEFAULT_VERSION,
        "MODEL_PROTOCOL": "anthropic",
        "MODEL_BASE_URL": endpoint.anthropic_url,
        "MODEL_NAME": "smollm2/base",
        "MODEL_API_KEY": endpoint.key,
        "CLAUDE_CODE_TOOLS": "Bash",
        "NETWORK": "public",
    }
    profile = write_profile(tmp_path / "cc.json", params, secret=["MODEL_API_KEY"])
    el.ok("profile", "create", "team/cc-local", "1", "--file", str(profile))
    started = time.monotonic()
    job = el.ok(
        *("job", "submit", "--dataset", "local-cc@1", "--profile", "team/cc-local@1"),
        *("--max-steps", "1", "--agent-timeout", "2000", "--wait", "--json"),
        timeout=2300,
    ).json()
    print(f"claude-code trial against el model serve: {time.monotonic() - started:.0f} s")
    assert job["status"] == "completed"

    [trial] = el.ok("trial", "list", "--job", job["id"], "--json").json()
    assert trial["status"] == "completed", trial["error_message"]
    assert trial["error_type"] is None, trial["error_message"]
    assert trial["reward"] in (0.0, 1.0)
    got = el.ok("trial", "get", trial["id"], "--steps", "--json").json()
    trajectory = got["trajectory"]
    assert (trajectory["agent"], trajectory["protocol"]) == ("claude-code", "anthropic")
    assert trajectory["stop_reason"] in ("done", "max_steps")
    steps = trajectory["steps"]
    model_steps = [s for s in steps if s["kind"] == "model"]
    for step in model_steps:
        print(f"model step: {json.dumps(step['usage'])}, {step['duration_ms']} ms, stop {step['stop']}")
    assert model_steps, [s["kind"] for s in steps]
    first = next(s for s in model_steps if "Bash" in s["request"]["tools"])  # not a side request
    assert first["request"]["model"] == "smollm2/base" and first["error"] is None
    assert first["request"]["tools"] == ["Bash"]
    assert first["usage"]["input_tokens"] > 2000  # Claude Code's own prompt, read by this model
    assert steps[-1]["kind"] == "verifier"
    assert endpoint.key not in json.dumps(got)
