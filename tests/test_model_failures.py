"""A model that never answered leaves its attempt unscored (SPEC section 7), through the real worker:
the verifier still runs, but its verdict on an untouched workspace measures the endpoint (a missing
key, a wrong model name), not the model. A model that answered before it failed keeps the reward of
the work its agent did."""

from pathlib import Path

from envloop.scheduling.model_failures import NEVER_ANSWERED
from envloop.testing import Reply, ScriptedServer, ScriptedToolCall
from tests.conftest import El, make_task, write_profile
from tests.test_agent_envloop import params


def _job(el: El, tmp_path: Path, server: ScriptedServer, name: str) -> dict[str, object]:
    profile = write_profile(tmp_path / f"{name}.json", params(server))
    el.ok(
        "profile",
        "create",
        f"team/{name}",
        "1",
        "--file",
        str(profile),
    )
    result = el("job", "submit", "--dataset", "agentic@1", "--profile", f"team/{name}@1", "--wait", "--json")
    assert result.code == 3, result.stderr  # the trial failed: model_error
    job = result.json()
    [trial] = el.ok("trial", "list", "--job", str(job["id"]), "--json").json()
    return dict(trial)


def test_a_model_that_refused_every_call_leaves_the_attempt_unscored_never_zero(
    el: El, tmp_path: Path
) -> None:
    make_task(tmp_path / "tasks", "hello", solve="touch done")
    el.ok("dataset", "push", str(tmp_path / "tasks"), "--name", "agentic")
    with ScriptedServer(default=lambda _: Reply(status=401, error="invalid API key")) as server:
        trial = _job(el, tmp_path, server, "keyless")
    assert (trial["status"], trial["error_type"]) == ("failed", "model_error")
    assert trial["reward"] is None and trial["reward_note"] == NEVER_ANSWERED
    job = str(trial["job_id"])
    result = el.ok("job", "result", job, "--json").json()
    counts = result["profiles"]["team/keyless@1"]["score_counts"]
    assert (counts["scored"], counts["invalid"]) == (0, 1)


def test_a_model_that_answered_before_failing_keeps_the_verifiers_reward(el: El, tmp_path: Path) -> None:
    make_task(tmp_path / "tasks", "hello", solve="touch done")
    el.ok("dataset", "push", str(tmp_path / "tasks"), "--name", "agentic")
    script = [
        Reply(tool_calls=[ScriptedToolCall(name="bash", arguments={"command": "touch done"})]),
        Reply(status=400, error="context window exceeded"),
    ]
    with ScriptedServer(script) as server:
        trial = _job(el, tmp_path, server, "partial")
    assert (trial["status"], trial["error_type"], trial["reward"]) == ("failed", "model_error", 1.0)
