"""Whether the oracle passes each task, said by the job result: the check an operator reads before
trusting a dataset under stricter verification (`--verifier-environment separate`)."""

from pathlib import Path

import pytest

from envloop.core.metrics import MemberRow
from envloop.core.oracle_check import check_oracle
from envloop.core.trial import VerifierEnvironment
from envloop.environments.local.bwrap import bwrap_executable
from envloop.services import datasets
from envloop.services.context import Context
from envloop.wire.jobs import JobRequest
from tests.conftest import El, make_task, publish_profile, run_job_in_process


def _row(task: str, *attempts: float | str) -> MemberRow:
    scored = [a for a in attempts if not isinstance(a, str)]
    return MemberRow.model_validate(
        {
            "task": task,
            "attempts": list(attempts),
            "scored": len(scored),
            "mean": None,
            "passes": None,
            "complete": True,
        }
    )


def test_a_task_passes_only_when_every_attempt_scored_one() -> None:
    check = check_oracle(
        [
            _row("all-one", 1.0, 1.0),
            _row("half", 1.0, 0.5),
            _row("none", "invalid", 0.0, "invalid"),
            _row("running", 1.0, "waiting"),
            _row("never", "undispatched"),
        ]
    )
    assert check.passing == ["all-one"]
    assert [(m.task, m.why) for m in check.missed] == [
        ("half", "reward 0.5"),
        ("none", "no reward: invalid, reward 0"),
    ]
    assert check.pending == ["running", "never"]
    assert check.line() == "passes on 1 of 3 tasks (2 still running)"


TRUSTS_TMP = (
    'logs="${ENVLOOP_LOGS_DIR:-/logs}"\n'
    'if [ -f /tmp/solved ]; then echo 1 > "$logs/verifier/reward.txt"\n'
    'else echo 0 > "$logs/verifier/reward.txt"; fi\n'
)


@pytest.mark.skipif(bwrap_executable()[0] is None, reason="no bwrap")
@pytest.mark.parametrize("verifier_environment", ["task", "separate"])
def test_the_job_result_says_which_tasks_the_oracle_still_passes_with_verifiers_apart(
    el: El, ctx: Context, tmp_path: Path, verifier_environment: VerifierEnvironment
) -> None:
    root = tmp_path / "tasks"
    make_task(root, "in-workdir", solve="touch done")
    make_task(root, "in-tmp", solve="touch /tmp/solved", test=TRUSTS_TMP)
    dataset = datasets.push_dataset(ctx, root, "ds").ref
    agents = [
        publish_profile(ctx, tmp_path / f"{agent}.json", agent, {"AGENT_NAME": agent})
        for agent in ("oracle", "nop")
    ]
    request = JobRequest(
        dataset=dataset, profiles=agents, environment="local", verifier_environment=verifier_environment
    )
    job = {"id": run_job_in_process(ctx, request)}
    result = el.ok("job", "result", job["id"], "--json").json()
    assert result["verifier_environment"] == verifier_environment
    assert result["profiles"]["nop@1"]["oracle"] is None  # only the oracle's profile is checked
    oracle = result["profiles"]["oracle@1"]["oracle"]
    shown = el.ok("job", "result", job["id"]).stdout
    if verifier_environment == "task":
        assert (oracle["passing"], oracle["missed"]) == (["in-tmp", "in-workdir"], [])
        assert "oracle passes on 2 of 2 tasks\n" in shown
    else:
        assert oracle["passing"] == ["in-workdir"]
        assert oracle["missed"] == [{"task": "in-tmp", "why": "reward 0"}]
        assert (
            "oracle passes on 1 of 2 tasks with every verifier apart (--verifier-environment separate)"
            in shown
        )
        assert "not on: in-tmp (reward 0)" in shown
