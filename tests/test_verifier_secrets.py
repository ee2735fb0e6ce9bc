"""A key only the task's verifier needs (an LLM judge's, `${JUDGE_KEY}` in `[verifier] env`) is a
profile param like any other, but the agent never gets it: a hostile agent could use or leak it."""

import asyncio
from pathlib import Path

import pytest

from envloop.core.ids import new_id
from envloop.core.trial import TrialSpec
from envloop.environments import LocalEnvironmentProvider
from envloop.environments.local.bwrap import bwrap_executable
from envloop.runners import ShellRunner

SNOOP = 'echo "${JUDGE_KEY:-none} ${SHARED_KEY:-none} ${PLAIN:-none}" > "$ENVLOOP_APP_DIR/seen"'
VERIFIER = """\
#!/usr/bin/env bash
logs="${ENVLOOP_LOGS_DIR:-/logs}"
cp "$ENVLOOP_APP_DIR/seen" "$logs/verifier/seen.txt"
r=0; [ "$JUDGE" = judge-secret-1234 ] && r=1; echo $r > "$logs/verifier/reward.txt"
"""
TOML = """\
version = "1.0"
[verifier.env]
JUDGE = "${JUDGE_KEY}"
ALSO = "${SHARED_KEY}"
[environment.env]
TASK_NEEDS = "${SHARED_KEY}"
"""


@pytest.mark.parametrize(
    "mode",
    [
        pytest.param("bwrap", marks=pytest.mark.skipif(bwrap_executable()[0] is None, reason="no bwrap")),
        "plain",
    ],
)
def test_a_param_only_the_verifier_names_never_reaches_the_agent(tmp_path: Path, mode: str) -> None:
    task = tmp_path / "task"
    (task / "tests").mkdir(parents=True)
    (task / "environment").mkdir()
    (task / "task.toml").write_text(TOML)
    (task / "instruction.md").write_text("Look around.\n")
    (task / "tests" / "test.sh").write_text(VERIFIER)
    spec = TrialSpec(
        job_id="job_judge",
        trial_id=new_id("trl"),
        task_name="task",
        attempt=1,
        profile_ref="team/snoop@1",
        runner="envloop/shell@1",
        params={
            "AGENT_NAME": "command",
            "AGENT_COMMAND": SNOOP,
            "JUDGE_KEY": "judge-secret-1234",
            "SHARED_KEY": "shared-5678",
            "PLAIN": "plain",
        },
        secret_values=("judge-secret-1234", "shared-5678"),
        task_dir=task,
        instance_root=tmp_path / "instances",
        artifacts_dir=tmp_path / "artifacts",
    )
    outcome = asyncio.run(ShellRunner(LocalEnvironmentProvider(mode)).run(spec))  # type: ignore[arg-type]
    assert outcome.error is None, outcome.error
    assert outcome.reward == 1.0  # the verifier got its key
    # The agent saw the param the task's own environment names too (masked when kept), and the
    # plain one, but not the judge's key.
    assert (tmp_path / "artifacts" / "verifier" / "seen.txt").read_text() == "none *** plain\n"
    assert "not given to the agent, the task's verifier's only: JUDGE_KEY" in outcome.warnings
