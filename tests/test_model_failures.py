"""Model failures are not rewards: a model that refused or failed every call leaves the trial a
`model_error` without a reward, for every agent and for the chat runner alike, whatever the
verifier read from what the agent left; some failed calls leave it scored and flagged."""

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from envloop.core.model_failures import judge_model_calls
from envloop.core.trial import TrialError, TrialOutcome
from envloop.testing import Reply, ScriptedServer, ScriptedToolCall
from tests.conftest import El, make_task, write_profile
from tests.test_agent_envloop import params

RIGHT_KEY = "sk-the-right-key-7f3a"
WRONG_KEY = "sk-a-revoked-key-91c2"


@pytest.fixture
def refusing_endpoint() -> Iterator[str]:
    """`python -m envloop.testing` requiring a key the profiles do not have: HTTP 401 to every call."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "envloop.testing", "--api-key", RIGHT_KEY],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _trials(el: El, job_id: str) -> list[dict[str, object]]:
    return el.ok("trial", "list", "--job", job_id, "--json").json()  # type: ignore[no-any-return]


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_a_model_that_refuses_every_call_leaves_envloop_agent_and_chat_trials_unscored_alike(
    el: El, tmp_path: Path, refusing_endpoint: str, store_url: str
) -> None:
    make_task(tmp_path / "tasks", "untouched")  # its verifier writes 0 when the agent did nothing
    el.ok("dataset", "push", str(tmp_path / "tasks"), "--name", "shell")
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"prompt": "2+2?", "answer": "4"}) + "\n")
    el.ok("dataset", "push", str(rows), "--name", "chat", "--scorer", "exact")
    model = {
        "MODEL_PROTOCOL": "openai",
        "MODEL_BASE_URL": refusing_endpoint + "/v1",
        "MODEL_NAME": "scripted",
        "MODEL_API_KEY": WRONG_KEY,
        "MAX_RETRIES": "0",
    }
    agent = write_profile(tmp_path / "agent.json", {"AGENT_NAME": "envloop", **model}, ["MODEL_API_KEY"])
    chat = write_profile(tmp_path / "chat.json", model, ["MODEL_API_KEY"])
    el.ok("profile", "create", "team/agent", "1", "--file", str(agent))
    el.ok("profile", "create", "team/chat", "1", "--file", str(chat))

    jobs = []
    for dataset, profile in (("shell@1", "team/agent@1"), ("chat@1", "team/chat@1")):
        submitted = el("job", "submit", "--dataset", dataset, "--profile", profile, "--attempts", "2",
                       "--wait", "--json")  # fmt: skip
        assert submitted.code == 3, submitted.stderr  # the job failed: its trials did
        job_id = submitted.json()["id"]
        jobs.append(job_id)
        result = el.ok("job", "result", job_id, "--json").json()
        [metrics] = result["profiles"].values()
        assert metrics["score"] is None
        assert (metrics["score_counts"]["scored"], metrics["score_counts"]["missing"]) == (0, 2)
        for trial in _trials(el, job_id):
            assert (trial["status"], trial["error_type"], trial["reward"]) == ("failed", "model_error", None)
            assert str(trial["reward_note"]).startswith("not counted: every model call failed")
        [group] = result["diagnosis"]["failures"]
        assert (group["error_type"], group["count"]) == ("model_error", 2)

    [trial, _] = _trials(el, jobs[0])
    shown = el.ok("trial", "get", str(trial["id"]), "--steps", "--json").json()
    verifier = shown["trajectory"]["steps"][-1]
    assert verifier["kind"] == "verifier" and verifier["reward"] == 0.0  # kept for inspection only
    assert "401" in shown["error_message"]
    assert WRONG_KEY not in json.dumps(shown)


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_recorded_calls_decide_for_any_agent_some_failed_flags_all_failed_unscores(
    el: El, tmp_path: Path, store_url: str
) -> None:
    plugins = {"ENVLOOP_PLUGIN_MODULES": "tests.recorded_calls_agent"}
    make_task(tmp_path / "tasks", "solvable")  # the agent solves it: the verifier writes 1
    el.ok("dataset", "push", str(tmp_path / "tasks"), "--name", "calls")
    for name, calls, failed in (("flaky", "7", "3"), ("refused", "2", "2")):
        params = {"AGENT_NAME": "tests.recorded_calls_agent:RecordedCalls", "CALLS": calls, "FAILED": failed}
        path = write_profile(tmp_path / f"{name}.json", params)
        assert el("profile", "create", f"team/{name}", "1", "--file", str(path), env=plugins).code == 0
    submitted = el("job", "submit", "--dataset", "calls@1", "--profile", "team/flaky@1", "--profile",
                   "team/refused@1", "--wait", "--json", env=plugins)  # fmt: skip
    job_id = submitted.json()["id"]
    by_profile = {trial["profile"]: trial for trial in _trials(el, job_id)}

    flaky = el.ok("trial", "get", str(by_profile["team/flaky@1"]["id"]), "--json").json()
    assert (flaky["status"], flaky["reward"]) == ("completed", 1.0)
    assert flaky["flags"] == [{"kind": "model-errors", "detail": "3 of 7 model calls failed", "paths": []}]

    refused = el.ok("trial", "get", str(by_profile["team/refused@1"]["id"]), "--json").json()
    assert (refused["status"], refused["error_type"], refused["reward"]) == ("failed", "model_error", None)
    assert refused["reward_note"] == (
        "not counted: every model call failed (the verifier's reading, 1, stays in the trajectory)"
    )
    assert refused["flags"] == []
    result = el.ok("job", "result", job_id, "--json").json()
    assert result["flags"] == {"flagged": 1, "by_kind": {"model-errors": 1}}
    assert "1 trial flagged (model-errors 1)" in el.ok("job", "result", job_id).stdout


def test_the_rule_keeps_errors_that_already_say_why_and_replaces_the_others() -> None:
    def outcome(error: str | None) -> TrialOutcome:
        return TrialOutcome(
            status="failed" if error else "completed",
            error=TrialError(type=error, message="why") if error else None,  # type: ignore[arg-type]
            reward=0.0,
            dimensions={"tests": 0.0},
            usage={"calls": 4, "failed_calls": 4},
            structured_result=True,
        )

    for kept in ("model_error", "agent_timeout", "environment_error", "infrastructure_error"):
        judged = judge_model_calls(outcome(kept))
        assert judged.error is not None and (judged.error.type, judged.error.message) == (kept, "why")
        assert (judged.status, judged.reward, judged.dimensions, judged.structured_result) == (
            "failed", None, {}, False,
        )  # fmt: skip
    for replaced in (None, "agent_error", "verifier_error", "verifier_timeout"):
        judged = judge_model_calls(outcome(replaced))
        assert judged.error is not None and judged.error.type == "model_error"
        assert judged.error.message.startswith("every model call failed (4 of 4 model calls failed)")
        assert judged.reward is None
    untouched = TrialOutcome(status="completed", reward=0.0, usage={"calls": 3})
    assert judge_model_calls(untouched) == untouched
    assert judge_model_calls(TrialOutcome(status="completed", reward=0.0)).reward == 0.0  # no model at all


def test_a_model_that_answered_before_failing_keeps_the_verifiers_reward_and_is_flagged(
    el: El, tmp_path: Path
) -> None:
    make_task(tmp_path / "tasks", "hello", solve="touch done")
    el.ok("dataset", "push", str(tmp_path / "tasks"), "--name", "agentic")
    script = [
        Reply(tool_calls=[ScriptedToolCall(name="bash", arguments={"command": "touch done"})]),
        Reply(status=400, error="context window exceeded"),
    ]
    with ScriptedServer(script) as server:
        profile = write_profile(tmp_path / "partial.json", params(server))
        el.ok("profile", "create", "team/partial", "1", "--file", str(profile))
        result = el(
            "job", "submit", "--dataset", "agentic@1", "--profile", "team/partial@1", "--wait", "--json"
        )
    assert result.code == 3, result.stderr  # the trial failed: model_error
    [trial] = _trials(el, str(result.json()["id"]))
    assert (trial["status"], trial["error_type"], trial["reward"]) == ("failed", "model_error", 1.0)
    shown = el.ok("trial", "get", str(trial["id"]), "--json").json()
    assert [flag["kind"] for flag in shown["flags"]] == ["model-errors"]
