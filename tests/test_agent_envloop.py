"""The `envloop` tool agent on `envloop/shell@1`: a real sandbox, real commands, the scripted endpoint
speaking both protocols through the official SDKs, and the trajectory the trial keeps."""

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from envloop.core.ids import new_id
from envloop.core.trajectory import ModelStep, SystemStep, ToolStep, Trajectory, UserStep, VerifierStep
from envloop.core.trial import TrialOutcome, TrialSpec
from envloop.models import close_clients
from envloop.runners import ShellRunner
from envloop.runners.params import check_params, unread_params
from envloop.testing import Received, Reply, ScriptedServer, ScriptedToolCall
from envloop.trajectories import read_trajectory
from tests.conftest import EXAMPLES, REPO, El, make_task, write_profile

SECRET = "sk-envloop-test-5e3f9a1b"


def bash(command: str, call_id: str | None = None) -> Reply:
    return Reply(tool_calls=[ScriptedToolCall(name="bash", arguments={"command": command}, id=call_id)])


def finish(summary: str = "done") -> Reply:
    return Reply(tool_calls=[ScriptedToolCall(name="finish", arguments={"summary": summary})])


def params(server: ScriptedServer, protocol: str = "openai", **extra: str) -> dict[str, str]:
    url = server.openai_url if protocol == "openai" else server.anthropic_url
    return {
        "AGENT_NAME": "envloop",
        "MODEL_PROTOCOL": protocol,
        "MODEL_BASE_URL": url,
        "MODEL_NAME": "team-model/sft",
        "MAX_RETRIES": "0",
        **extra,
    }


def run(tmp_path: Path, profile: dict[str, str], task: Path | None = None, **fields: Any) -> TrialOutcome:
    task = task or make_task(tmp_path / "tasks", "hello", solve="touch done")
    spec = TrialSpec(
        job_id="job_agent",
        trial_id=new_id("trl"),
        task_name=task.name,
        attempt=1,
        profile_ref="team/agent@1",
        runner="envloop/shell@1",
        params=profile,
        secret_values=tuple(v for k, v in profile.items() if k in ("MODEL_API_KEY", "JUDGE_KEY")),
        task_dir=task,
        instance_root=tmp_path / "instances",
        artifacts_dir=tmp_path / "artifacts",
        **fields,
    )

    async def go() -> TrialOutcome:
        try:
            return await ShellRunner().run(spec)
        finally:
            await close_clients()

    return asyncio.run(go())


def trajectory(tmp_path: Path) -> Trajectory:
    return read_trajectory(tmp_path / "artifacts" / "trajectory.json")


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_the_agent_runs_bash_in_the_sandbox_until_it_calls_finish(tmp_path: Path, protocol: str) -> None:
    script = [bash("echo hi > done && cat done", "c1"), finish("created done")]
    with ScriptedServer(script) as server:
        outcome = run(tmp_path, params(server, protocol))
    assert outcome.status == "completed", outcome.error
    assert (outcome.reward, outcome.stop_reason) == (1.0, "done")
    assert outcome.usage["calls"] == 2 and outcome.usage["input_tokens"] > 0
    steps = trajectory(tmp_path).steps
    assert [s.kind for s in steps] == ["system", "user", "model", "tool", "model", "tool", "verifier"]
    system, user, _, command, _, done, verifier = steps
    assert isinstance(system, SystemStep) and "bash" in system.text
    assert isinstance(user, UserStep) and user.text == "Do the hello thing.\n"
    assert isinstance(command, ToolStep)
    assert (command.call_id, command.command, command.exit_code, command.stdout) == (
        "c1",
        "echo hi > done && cat done",
        0,
        "hi\n",
    )
    [created] = command.changes
    assert (created.path, created.change, created.size) == ("done", "created", 3)
    assert created.diff is not None and "+hi" in created.diff
    assert isinstance(done, ToolStep) and (done.tool, done.stdout) == ("finish", "created done")
    assert isinstance(verifier, VerifierStep) and verifier.reward == 1.0
    # The command's result went back to the model as the answer to its call.
    answered = server.received[1].messages[-1]
    if protocol == "openai":
        assert answered == {"role": "tool", "tool_call_id": "c1", "content": "exit code 0\nstdout:\nhi\n"}
    else:
        [block] = answered["content"]
        assert block["tool_use_id"] == "c1" and "hi" in json.dumps(block["content"])


def test_an_answer_without_a_tool_call_ends_the_loop_as_done(tmp_path: Path) -> None:
    with ScriptedServer([Reply(text="Nothing to do.")]) as server:
        outcome = run(tmp_path, params(server))
    assert (outcome.status, outcome.stop_reason, outcome.reward) == ("completed", "done", 0.0)
    assert [s.kind for s in trajectory(tmp_path).steps] == ["system", "user", "model", "verifier"]


def test_an_answer_cut_by_the_token_limit_stops_with_length(tmp_path: Path) -> None:
    with ScriptedServer([Reply(text="I will now", stop="length")]) as server:
        outcome = run(tmp_path, params(server))
    assert (outcome.status, outcome.stop_reason) == ("completed", "length")


def test_the_profiles_max_steps_bounds_the_model_calls(tmp_path: Path) -> None:
    with ScriptedServer(default=lambda _: bash("true")) as server:
        outcome = run(tmp_path, params(server, MAX_STEPS="3"))
    assert (outcome.status, outcome.stop_reason) == ("completed", "max_steps")
    assert len(server.received) == 3
    kinds = [s.kind for s in trajectory(tmp_path).steps]
    assert kinds.count("model") == 3 and kinds.count("tool") == 3


def test_the_jobs_max_steps_wins_over_the_profiles(tmp_path: Path) -> None:
    with ScriptedServer(default=lambda _: bash("true")) as server:
        outcome = run(tmp_path, params(server, MAX_STEPS="5"), max_steps=2)
    assert outcome.stop_reason == "max_steps"
    assert len(server.received) == 2


def test_long_output_is_clipped_for_the_model_but_kept_whole_in_the_trajectory(tmp_path: Path) -> None:
    script = [bash("seq 1 100000"), finish()]
    with ScriptedServer(script) as server:
        run(tmp_path, params(server, TOOL_OUTPUT_LIMIT="2000"))
    sent = server.received[1].messages[-1]["content"]
    assert len(sent) < 2200 and "characters left out" in sent
    assert sent.startswith("exit code 0\nstdout:\n1\n2\n") and sent.endswith("99999\n100000\n")
    [tool] = [s for s in trajectory(tmp_path).steps if isinstance(s, ToolStep) and s.tool == "bash"]
    whole = "".join(f"{n}\n" for n in range(1, 100001))
    assert tool.stdout == whole and not tool.output_truncated
    assert (tmp_path / "artifacts" / "agent" / "commands" / "0001.stdout").read_text() == whole


def test_bad_calls_are_answered_with_an_error_and_the_loop_goes_on(tmp_path: Path) -> None:
    script = [
        Reply(tool_calls=[ScriptedToolCall(name="python", arguments={"code": "1"}, id="c1")]),
        Reply(tool_calls=[ScriptedToolCall(name="bash", arguments={}, id="c2")]),
        bash("exit 3", "c3"),
        finish(),
    ]
    with ScriptedServer(script) as server:
        outcome = run(tmp_path, params(server))
    assert (outcome.status, outcome.stop_reason) == ("completed", "done")
    replies = [server.received[i].messages[-1] for i in (1, 2, 3)]
    assert replies[0]["content"] == "error: unknown tool 'python': use bash or finish"
    assert replies[1]["content"] == "error: bash needs a non-empty `command` string"
    assert replies[2]["content"] == "exit code 3"
    tools = [s for s in trajectory(tmp_path).steps if isinstance(s, ToolStep)]
    assert [t.error is not None for t in tools] == [True, True, False, False]
    assert tools[2].exit_code == 3


def test_a_model_that_fails_for_good_fails_the_trial_as_model_error(tmp_path: Path) -> None:
    script = [bash("touch done"), Reply(status=400, error="context window exceeded")]
    with ScriptedServer(script) as server:
        outcome = run(tmp_path, params(server))
    assert outcome.status == "failed" and outcome.error is not None
    assert outcome.error.type == "model_error"
    assert "context window exceeded" in outcome.error.message
    assert outcome.stop_reason == "model_error"
    # The verifier still runs and sees the work done before the failure.
    assert outcome.reward == 1.0
    last_model = [s for s in trajectory(tmp_path).steps if isinstance(s, ModelStep)][-1]
    assert last_model.error is not None and "context window exceeded" in last_model.error


def test_the_agent_timeout_stops_the_loop_and_kills_the_running_command(tmp_path: Path) -> None:
    with ScriptedServer([bash("touch started; sleep 60")]) as server:
        outcome = run(tmp_path, params(server), agent_timeout_sec=1.5)
    assert outcome.error is not None and outcome.error.type == "agent_timeout"
    assert outcome.stop_reason == "timeout"
    assert [p.name for p in outcome.phases][:3] == ["setup", "agent", "verifier"]
    kept = trajectory(tmp_path)
    assert kept.stop_reason == "timeout"
    interrupted = kept.steps[-2]
    assert isinstance(interrupted, ToolStep) and interrupted.error is not None
    assert "interrupted" in interrupted.error and [c.path for c in interrupted.changes] == ["started"]


def test_a_command_over_its_own_timeout_is_killed_and_reported_to_the_model(tmp_path: Path) -> None:
    script = [bash("sleep 30"), finish()]
    with ScriptedServer(script) as server:
        outcome = run(tmp_path, params(server, TOOL_TIMEOUT_SEC="0.5"))
    assert outcome.stop_reason == "done"
    assert server.received[1].messages[-1]["content"] == "timed out after 0.5 s (killed)"
    [tool] = [s for s in trajectory(tmp_path).steps if isinstance(s, ToolStep) and s.tool == "bash"]
    assert tool.timed_out and tool.exit_code is None


def test_tool_choice_is_sent_as_each_protocol_spells_it(tmp_path: Path) -> None:
    with ScriptedServer([finish(), finish()]) as server:
        run(tmp_path / "a", params(server, TOOL_CHOICE="bash"))
        run(tmp_path / "b", params(server, "anthropic", TOOL_CHOICE="required"))
    openai, anthropic = (r.body["tool_choice"] for r in server.received)
    assert openai == {"type": "function", "function": {"name": "bash"}}
    assert anthropic == {"type": "any"}


def test_secrets_are_masked_for_the_model_and_in_everything_kept(tmp_path: Path) -> None:
    task = make_task(tmp_path / "tasks", "secretive", toml='[environment.env]\nJUDGE_KEY = "${JUDGE_KEY}"\n')
    seen: list[Received] = []

    def respond(received: Received) -> Reply:
        seen.append(received)
        return bash('echo "key=$JUDGE_KEY"') if len(seen) == 1 else finish()

    with ScriptedServer(default=respond, api_key=SECRET) as server:
        profile = params(server, MODEL_API_KEY=SECRET, JUDGE_KEY="judge-secret-77aa")
        outcome = run(tmp_path, profile, task=task)
    assert outcome.stop_reason == "done", outcome.error
    assert seen[1].messages[-1]["content"] == "exit code 0\nstdout:\nkey=***\n"
    kept = subprocess.run(
        ["grep", "-rlE", f"{SECRET}|judge-secret-77aa", str(tmp_path / "artifacts")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert kept.stdout == ""
    assert "key=***" in (tmp_path / "artifacts" / "trajectory.json").read_text()


def test_bad_agent_params_are_refused_before_anything_runs() -> None:
    runner = ShellRunner()
    problems = check_params(
        runner,
        {
            "AGENT_NAME": "envloop",
            "MODEL_PROTOCOL": "grpc",
            "MODEL_BASE_URL": "http://x/v1",
            "MODEL_NAME": "m",
            "MAX_STEPS": "0",
            "TOOL_CHOICE": "always",
        },
    )
    assert problems == [
        "MODEL_PROTOCOL must be one of openai, anthropic, not 'grpc'",
        "MAX_STEPS must be a whole number ≥ 1, not '0'",
        "TOOL_CHOICE must be one of auto, required, bash, not 'always'",
    ]
    assert check_params(runner, {"AGENT_NAME": "envloop"}) == [
        "MODEL_PROTOCOL is required (openai or anthropic) when AGENT_NAME=envloop",
        "MODEL_BASE_URL is required when AGENT_NAME=envloop",
        "MODEL_NAME is required when AGENT_NAME=envloop",
    ]


@pytest.mark.parametrize("name", ["smollm2-agent.json", "claude-code.json"])
def test_the_example_agent_profiles_are_accepted(name: str) -> None:
    document = json.loads((EXAMPLES / "profiles" / name).read_text())
    params = document["spec"]["params"]
    assert check_params(ShellRunner(), params) == []
    assert unread_params(ShellRunner(), params).names == []


def test_from_the_cli_the_jobs_max_steps_bounds_the_agent_and_steps_are_printed(
    el: El, tmp_path: Path
) -> None:
    make_task(tmp_path / "tasks", "hello", solve="touch done")
    el.ok("dataset", "push", str(tmp_path / "tasks"), "--name", "agentic")
    with ScriptedServer(default=lambda _: bash("echo step >> log.txt"), api_key=SECRET) as server:
        profile = write_profile(
            tmp_path / "agent.json",
            params(server, MODEL_API_KEY=SECRET, MAX_STEPS="9"),
            secret=["MODEL_API_KEY"],
        )
        el.ok("profile", "create", "team/agent", "1", "--file", str(profile))
        job = el.ok(
            "job",
            "submit",
            "--dataset",
            "agentic@1",
            "--profile",
            "team/agent@1",
            "--max-steps",
            "2",
            "--wait",
            "--json",
        ).json()
    [trial] = el.ok("trial", "list", "--job", job["id"], "--json").json()
    text = el.ok("trial", "get", trial["id"], "--steps").stdout
    assert text.count(" model ") == 2 and text.count(" tool ") == 2
    assert "$ echo step >> log.txt" in text and "modified log.txt" in text
    assert "stop max_steps" in text
    assert SECRET not in text


def test_the_agent_benchmark_runs_and_prints_its_figures() -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "agent.py"), "--steps", "4", "--trials", "1", "--files", "5"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    for label in ("own overhead per step", "model wait per step", "sandboxed command"):
        assert label in proc.stdout
