"""Variables a task's env sections reference as ${NAME}: provided by the profile, checked at submission."""

import asyncio
import hashlib
from pathlib import Path

import pytest

from envloop.errors import UserError
from envloop.scheduling.worker import Worker, WorkerConfig
from envloop.services import datasets, job_submission, profiles, trials
from envloop.services.context import Context
from envloop.tasks.harbor import load_harbor_task
from envloop.tasks.variables import referenced_variables, resolve_env
from tests.conftest import make_task, write_profile

SECRET = "judge-secret-91c3"
TOML = '[verifier]\nenv = { JUDGE = "${JUDGE_KEY}", MODE = "strict-${LEVEL}" }\n'
SECRET_SHA256 = hashlib.sha256(SECRET.encode()).hexdigest()
TEST = (  # the task never contains the secret itself: it checks a hash
    'logs="${ENVLOOP_LOGS_DIR:-/logs}"\n'
    'echo "judge is $JUDGE, mode $MODE"\n'
    'got="$(printf %s "$JUDGE" | sha256sum | cut -d" " -f1)"\n'
    f'if [ "$got" = "{SECRET_SHA256}" ] && [ "$MODE" = "strict-2" ]; then echo 1; else echo 0; fi'
    ' > "$logs/verifier/reward.txt"\n'
)


def test_references_are_found_in_environment_and_verifier_env(tmp_path: Path) -> None:
    task = load_harbor_task(make_task(tmp_path, "judged", toml=TOML))
    assert referenced_variables(task) == ["JUDGE_KEY", "LEVEL"]
    assert resolve_env(task.config.verifier.env, {"JUDGE_KEY": "k", "LEVEL": "2"}) == {
        "JUDGE": "k",
        "MODE": "strict-2",
    }


def test_a_profile_without_a_referenced_variable_is_refused_at_submission(
    ctx: Context, tmp_path: Path
) -> None:
    make_task(tmp_path / "src", "judged", toml=TOML, test=TEST)
    ref = datasets.push_dataset(ctx, tmp_path / "src", "judged").ref
    doc = profiles.read_profile_file(write_profile(tmp_path / "p.json", {"AGENT_NAME": "nop", "LEVEL": "2"}))
    profiles.create_profile(ctx, "p", "1", doc)
    with pytest.raises(UserError, match="JUDGE_KEY"):
        job_submission.submit_job(ctx, job_submission.JobRequest(dataset=ref, profiles=["p@1"]))


def test_the_verifier_sees_profile_values_and_the_secret_stays_masked(ctx: Context, tmp_path: Path) -> None:
    make_task(tmp_path / "src", "judged", toml=TOML, test=TEST)
    ref = datasets.push_dataset(ctx, tmp_path / "src", "judged").ref
    params = {"AGENT_NAME": "nop", "JUDGE_KEY": SECRET, "LEVEL": "2"}
    doc = profiles.read_profile_file(write_profile(tmp_path / "p.json", params, ["JUDGE_KEY"]))
    profiles.create_profile(ctx, "p", "1", doc)
    result = job_submission.submit_job(ctx, job_submission.JobRequest(dataset=ref, profiles=["p@1"]))
    assert not any("JUDGE_KEY" in w or "LEVEL" in w for w in result.warnings)
    worker = Worker(ctx, WorkerConfig(capacity=1, idle_poll=0.01))
    asyncio.run(worker.run(until=lambda: worker.completed >= 1))
    (trial,) = trials.list_trials(ctx, result.job.id)
    assert trial.reward == 1.0
    logs = trials.trial_logs(ctx, trial.id, "verifier")
    assert "judge is ***, mode strict-2" in logs["stdout"]
    assert SECRET not in "".join(
        p.read_text(errors="replace") for p in ctx.artifacts.root.rglob("*") if p.is_file()
    )
