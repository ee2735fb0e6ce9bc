"""How a tool call ended, one vocabulary for the trace viewer and the job's tool usage: a command still
running when the agent's time limit ended the phase timed out (it ran; it was not refused), one
still running when the job was cancelled was cut off, and only a call the tool refused could not run."""

from pathlib import Path

from envloop.core.tool_outcomes import tool_outcomes
from envloop.core.trajectory import ModelRequestSummary, ModelStep, ToolCall, ToolStep, TrajectoryRecorder
from envloop.services.context import Context
from envloop.services.tool_usage import tool_usage
from envloop.testing import Reply, ScriptedServer, ScriptedToolCall
from tests.conftest import El, make_task, wait_for, write_profile
from tests.test_agent_envloop import params

INTERRUPTED = "interrupted: the agent phase ended while the command ran"


def _trajectory(stop: str | None) -> TrajectoryRecorder:
    recorder = TrajectoryRecorder("trl_x", "envloop/shell@1", "envloop")
    request = ModelRequestSummary(protocol="openai", endpoint="http://m/v1", model="m", messages=1)
    calls = [ToolCall(id=f"c{i}", name="bash") for i in range(4)]
    recorder.add(ModelStep(request=request, tool_calls=calls))
    recorder.add(ToolStep(call_id="c0", tool="python", error="unknown tool 'python': use bash or finish"))
    recorder.add(ToolStep(call_id="c1", tool="bash", command="false", exit_code=1))
    recorder.add(ToolStep(call_id="c2", tool="bash", command="sleep 9", timed_out=True))
    recorder.add(ToolStep(call_id="c3", tool="bash", command="sleep 99", error=INTERRUPTED))
    recorder.finish(stop)  # type: ignore[arg-type]
    return recorder


def test_a_command_cut_off_by_the_agent_timeout_timed_out_and_by_a_cancel_was_cut_off() -> None:
    timed_out = tool_outcomes(_trajectory("timeout").trajectory)
    assert list(timed_out.values()) == ["could_not_run", "nonzero_exit", "timed_out", "timed_out"]
    cancelled = tool_outcomes(_trajectory(None).trajectory)
    assert list(cancelled.values()) == ["could_not_run", "nonzero_exit", "timed_out", "cut_off"]


def test_tool_usage_counts_an_agent_timeout_as_a_timeout_never_as_could_not_run(
    el: El, ctx: Context, tmp_path: Path
) -> None:
    make_task(tmp_path / "tasks", "slow", solve="true")
    el.ok("dataset", "push", str(tmp_path / "tasks"), "--name", "slow")
    script = [Reply(tool_calls=[ScriptedToolCall(name="bash", arguments={"command": "sleep 60"})])]
    with ScriptedServer(script) as server:
        el.ok(
            "profile",
            "create",
            "team/slow",
            "1",
            "--file",
            str(write_profile(tmp_path / "p.json", params(server))),
        )
        job = el(
            *("job", "submit", "--dataset", "slow@1", "--profile", "team/slow@1"),
            *("--agent-timeout", "6", "--wait", "--json"),
        ).json()
    [trial] = el.ok("trial", "list", "--job", job["id"], "--json").json()
    assert trial["error_type"] == "agent_timeout"
    # The trial's files are published just after its result is recorded.
    wait_for(lambda: tool_usage(ctx, job["id"]).profiles["team/slow@1"].with_trajectory == 1)
    [bash] = tool_usage(ctx, job["id"]).profiles["team/slow@1"].tools
    assert (bash.calls, bash.timeouts, bash.errors, bash.cut_off) == (1, 1, 0, 0)
