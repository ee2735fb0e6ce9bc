"""The `claude-code` agent for real: the Claude Code CLI installed from the npm registry into the
worker's agent cache, run against the scripted Messages endpoint on the host's loopback through the
worker's model gateway: its tool steps come from its stream, its model calls from the gateway."""

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import pytest

from envloop.agents.claude_code import DEFAULT_VERSION
from envloop.core.ids import new_id
from envloop.core.trajectory import ModelStep, SystemStep, ToolStep, Trajectory, UserStep, VerifierStep
from envloop.core.trial import TrialOutcome, TrialSpec
from envloop.environments.local.bwrap import bwrap_executable
from envloop.runners import ShellRunner
from envloop.runners.params import check_params
from envloop.testing import Received, Reply, ScriptedServer, ScriptedToolCall
from envloop.trajectories import read_trajectory
from tests.agent_cli_support import shared_agent_cache
from tests.conftest import make_task

pytestmark = pytest.mark.slow
SECRET = "sk-ant-claude-code-test-4d2c"
HAS_BWRAP = bwrap_executable()[0] is not None


def tool_results(received: Received) -> int:
    return sum(
        1
        for message in received.messages
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    )


def solver(command: str) -> Any:
    """A model that runs `command` with Claude Code's Bash tool, then says it is done. Requests
    without the Bash tool (the CLI's own side requests, if any) get a plain answer."""

    def respond(received: Received) -> Reply:
        tools = [t.get("name") for t in received.body.get("tools", [])]
        if "Bash" not in tools:
            return Reply(text="ok")
        if tool_results(received) == 0:
            call = ScriptedToolCall(name="Bash", arguments={"command": command, "description": "solve"})
            return Reply(text="Solving it.", tool_calls=[call])
        return Reply(text="The file is in place.")

    return respond


def run(tmp_path: Path, server: ScriptedServer, task: Path | None = None, **extra: str) -> TrialOutcome:
    shared_agent_cache()
    task = task or make_task(tmp_path / "tasks", "hello", solve="touch done")
    params = {
        "AGENT_NAME": "claude-code",
        "AGENT_VERSION": DEFAULT_VERSION,
        "MODEL_PROTOCOL": "anthropic",
        "MODEL_BASE_URL": server.anthropic_url,
        "MODEL_NAME": "team-model/sft",
        "MODEL_API_KEY": SECRET,
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "2048",
        "CLAUDE_CODE_EFFORT_LEVEL": "medium",
        "NETWORK": "public",
        **extra,
    }
    spec = TrialSpec(
        job_id="job_cc",
        trial_id=new_id("trl"),
        task_name=task.name,
        attempt=1,
        profile_ref="team/cc@1",
        runner="envloop/shell@1",
        params={k: v for k, v in params.items() if v},
        secret_values=(SECRET,),
        task_dir=task,
        instance_root=tmp_path / "instances",
        artifacts_dir=tmp_path / "artifacts",
        agent_timeout_sec=600,
    )
    return asyncio.run(ShellRunner().run(spec))


def kept(tmp_path: Path) -> Trajectory:
    return read_trajectory(tmp_path / "artifacts" / "trajectory.json")


def test_claude_code_is_installed_runs_against_the_endpoint_and_is_recorded(tmp_path: Path) -> None:
    """Without NETWORK: the CLI comes from the worker's cache and its model through the gateway,
    so a sandbox with no network runs it all the same."""
    with ScriptedServer(
        default=solver("echo hi > done; echo made; echo $ANTHROPIC_API_KEY"), api_key=SECRET
    ) as server:
        outcome = run(tmp_path, server, NETWORK="")
    assert outcome.status == "completed", outcome.error
    assert outcome.sandbox == ("bwrap" if HAS_BWRAP else "plain")
    assert (outcome.reward, outcome.stop_reason) == (1.0, "done")
    # Every call went through the gateway, which added the real key and recorded it as a step.
    assert outcome.usage["calls"] == len(server.received) and outcome.usage["input_tokens"] > 0
    agent_requests = [
        r for r in server.received if any(t.get("name") == "Bash" for t in r.body.get("tools", []))
    ]
    assert len(agent_requests) == 2
    assert len(agent_requests[0].body["tools"]) > 10  # without CLAUDE_CODE_TOOLS: all its tools
    # The system prompt starts the same for every trial (no billing line that changes with the
    # task), so a server reusing an evaluated prefix reads Claude Code's prompt once.
    first_blocks = [r.body["system"][0]["text"] for r in agent_requests]
    assert first_blocks[0] == first_blocks[1] and "x-anthropic-billing-header" not in first_blocks[0]
    for request in agent_requests:
        assert request.model == "team-model/sft"
        assert request.headers.get("x-api-key") == SECRET
        assert request.body["max_tokens"] == 2048
        assert request.body.get("output_config", {}).get("effort") == "medium"
        assert "claude-cli/" + DEFAULT_VERSION in request.headers.get("user-agent", "")
    trajectory = kept(tmp_path)
    assert (trajectory.agent, trajectory.protocol, trajectory.stop_reason) == (
        "claude-code",
        "anthropic",
        "done",
    )
    steps = trajectory.steps
    install, user = steps[:2]
    assert isinstance(user, UserStep) and user.text == "Do the hello thing.\n"
    assert isinstance(install, ToolStep) and (install.tool, install.exit_code) == ("install", 0)
    # The CLI's start: its init line has no time of its own, so a side request the gateway recorded
    # meanwhile may come before it; every step is in the order it began.
    [system] = [s for s in steps if isinstance(s, SystemStep) and s.text.startswith("Claude Code")]
    assert f"Claude Code {DEFAULT_VERSION}" in system.text
    assert [s.at for s in steps[2:]] == sorted(s.at for s in steps[2:])
    models = [s for s in steps if isinstance(s, ModelStep)]
    assert len(models) == len(server.received)
    first, last = [s for s in models if "Bash" in s.request.tools]
    assert first.text == "Solving it." and first.stop == "tool_calls"
    assert first.tool_calls[0].name == "Bash"
    [bash] = [s for s in steps if isinstance(s, ToolStep) and s.tool == "Bash"]
    assert bash.call_id == first.tool_calls[0].id
    assert steps.index(first) < steps.index(bash) < steps.index(last)
    # The CLI held the gateway's token, never the key.
    assert bash.exit_code == 0 and bash.stdout.startswith("made\n") and SECRET not in bash.stdout
    assert [(c.path, c.change) for c in bash.changes] == [("done", "created")]
    assert (last.text, last.stop) == ("The file is in place.", "end")
    verifier = steps[-1]
    assert isinstance(verifier, VerifierStep) and verifier.reward == 1.0
    artifacts = tmp_path / "artifacts"
    assert (artifacts / "agent" / "claude-code.jsonl").stat().st_size > 0
    leaked = subprocess.run(
        ["grep", "-rl", SECRET, str(artifacts)], capture_output=True, text=True, check=False
    )
    assert leaked.stdout == ""


def test_the_step_budget_becomes_claude_codes_turn_limit(tmp_path: Path) -> None:
    endless = ScriptedToolCall(name="Bash", arguments={"command": "date >> log.txt", "description": "log"})
    with ScriptedServer(default=lambda _: Reply(text="Again.", tool_calls=[endless])) as server:
        outcome = run(tmp_path, server, MAX_STEPS="2", CLAUDE_CODE_TOOLS="Bash,Read")
    assert outcome.status == "completed", outcome.error
    assert outcome.stop_reason == "max_steps"
    model_steps = [s for s in kept(tmp_path).steps if isinstance(s, ModelStep) and "Bash" in s.request.tools]
    assert len(model_steps) == 2
    # CLAUDE_CODE_TOOLS: the model is offered those built-in tools and no other.
    offered = [r.body["tools"] for r in server.received if r.body.get("tools")]
    assert offered and all(sorted(t["name"] for t in tools) == ["Bash", "Read"] for tools in offered)


def test_an_endpoint_that_refuses_fails_the_trial_as_model_error(tmp_path: Path) -> None:
    with ScriptedServer(default=lambda _: Reply(status=400, error="this model does not exist")) as server:
        outcome = run(tmp_path, server)
    assert outcome.error is not None and outcome.error.type == "model_error"
    assert "this model does not exist" in outcome.error.message
    assert outcome.stop_reason == "model_error"
    assert outcome.reward == 0.0


def test_a_version_the_registry_lacks_fails_the_trial_with_npms_reason(tmp_path: Path) -> None:
    with ScriptedServer(default=solver("true")) as server:
        outcome = run(tmp_path, server, AGENT_VERSION="0.0.0-no-such-version")
    assert outcome.error is not None and outcome.error.type == "agent_setup_error"
    assert outcome.error.message.startswith("could not install claude-code 0.0.0-no-such-version: npm error")
    assert server.received == []
    assert outcome.reward is None  # an agent that could not be installed never worked on the task
    [install] = kept(tmp_path).steps  # the setup phase's; the agent never ran
    assert isinstance(install, ToolStep) and install.tool == "install" and install.exit_code != 0
    assert [phase.name for phase in outcome.phases] == ["setup", "agent_setup", "artifacts", "teardown"]


def test_claude_code_params_are_checked_at_submission() -> None:
    problems = check_params(
        ShellRunner(),
        {
            "AGENT_NAME": "claude-code",
            "MODEL_PROTOCOL": "openai",
            "MODEL_BASE_URL": "localhost:8000",
            "MODEL_NAME": "m",
            "AGENT_VERSION": "latest; rm -rf /",
            "CLAUDE_CODE_EFFORT_LEVEL": "extreme",
            "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "lots",
            "CLAUDE_CODE_TOOLS": "Bash; curl evil",
        },
    )
    assert problems == [
        "MODEL_PROTOCOL must be anthropic (claude-code speaks the Messages protocol only), not 'openai'",
        "MODEL_BASE_URL must be an http:// or https:// URL, not 'localhost:8000'",
        "AGENT_VERSION must be an npm version such as 2.1.285, not 'latest; rm -rf /'",
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS must be a whole number ≥ 1, not 'lots'",
        "CLAUDE_CODE_EFFORT_LEVEL must be one of low, medium, high, xhigh, max, not 'extreme'",
        "CLAUDE_CODE_TOOLS must be tool names separated by commas, such as Bash,Read,Edit,"
        " not 'Bash; curl evil'",
    ]


MCP_SERVER = """\
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    method, ident = message.get("method"), message.get("id")
    if ident is None:
        continue
    if method == "initialize":
        result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "probe", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "record", "description": "Record that the task is done",
                             "inputSchema": {"type": "object", "properties": {}}}]}
    elif method == "tools/call":
        open("/app/done-by-mcp", "w").write("recorded")
        result = {"content": [{"type": "text", "text": "recorded"}]}
    else:
        error = {"code": -32601, "message": method}
        print(json.dumps({"jsonrpc": "2.0", "id": ident, "error": error}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": ident, "result": result}), flush=True)
"""


def test_the_tasks_mcp_servers_are_offered_to_claude_code(tmp_path: Path) -> None:
    """A task's stdio MCP server runs inside the environment and Claude Code calls its tool."""
    task = make_task(
        tmp_path / "tasks",
        "mcp",
        test="reward=0; [ -f /app/done-by-mcp ] && reward=1; echo $reward > /logs/verifier/reward.txt",
        toml='[[environment.mcp_servers]]\nname = "probe"\ntransport = "stdio"\ncommand = "python3"\n'
        'args = ["/app/probe.py"]\n',
    )
    (task / "environment" / "probe.py").write_text(MCP_SERVER)
    (task / "environment" / "Dockerfile").write_text(
        "FROM debian:12\nWORKDIR /app\nCOPY probe.py /app/probe.py\n"
    )

    def respond(received: Received) -> Reply:
        tools = [t.get("name") for t in received.body.get("tools", [])]
        if "mcp__probe__record" not in tools:
            return Reply(text="ok")
        if tool_results(received) == 0:
            return Reply(
                text="Recording.", tool_calls=[ScriptedToolCall(name="mcp__probe__record", arguments={})]
            )
        return Reply(text="Recorded.")

    with ScriptedServer(default=respond, api_key=SECRET) as server:
        outcome = run(tmp_path, server, task)
    assert outcome.error is None, outcome.error
    assert outcome.reward == 1.0
    calls = [c.name for s in kept(tmp_path).steps if isinstance(s, ModelStep) for c in s.tool_calls]
    assert "mcp__probe__record" in calls
