"""What the agent CLIs are given and what is read back from them, without running them: install
commands for the environment's Python, refusals of environments that cannot run an agent, the
CLIs' configuration (model, endpoint, MCP servers, no key written down), and their output read as
hostile input."""

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from envloop.agents.aider import RECIPE as AIDER
from envloop.agents.aider import AiderParams, model_metadata
from envloop.agents.codex import CodexParams, codex_config
from envloop.agents.codex_events import CodexEvents
from envloop.agents.mini_swe_agent import RECIPE as MINI
from envloop.agents.opencode import OpenCodeParams, opencode_config
from envloop.agents.opencode_events import OpenCodeEvents
from envloop.agents.qwen_code import qwen_mcp_config
from envloop.agents.qwen_events import QwenEvents
from envloop.agents.recipes import PythonTarget
from envloop.core.trajectory import ModelRequestSummary, ModelStep, ToolStep, TrajectoryRecorder
from envloop.tasks.task_toml import McpServer

ENDPOINT = {
    "MODEL_BASE_URL": "http://gateway:8000/v1/",
    "MODEL_NAME": 'team/sft"x',
    "MODEL_API_KEY": "sk-hidden",
}
SERVERS = [
    McpServer(name="probe", transport="stdio", command="python3", args=["/app/probe.py", "--flag"]),
    McpServer(name="web", transport="streamable-http", url="http://mcp:9000/mcp"),
]


def python(minor: int, libc: str = "glibc", glibc_minor: int = 36) -> PythonTarget:
    return PythonTarget(3, minor, "x86_64", libc, (2, glibc_minor))


def test_pip_agents_are_installed_as_wheels_for_the_environments_own_python() -> None:
    command = MINI.commands("2.4.6", python(12, glibc_minor=31))[0]
    argv = list(command.argv)
    assert argv[argv.index("--python-version") + 1] == "3.12"
    assert "--only-binary=:all:" in argv and "cp312" in argv
    platforms = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--platform"]
    assert platforms[0] == "manylinux_2_31_x86_64" and "manylinux_2_32_x86_64" not in platforms
    assert argv[-1] == "mini-swe-agent==2.4.6"
    assert MINI.name("2.4.6", python(12)) == "mini-swe-agent-2.4.6-cp312-x64"


def test_a_pip_agent_is_compiled_to_bytecode_for_its_python_where_the_worker_has_that_python(
    tmp_path: Path,
) -> None:
    """The entry is read-only to trials: without bytecode made at install, every run compiles the
    agent's modules again in the agent's time. A module that does not compile fails nothing."""
    here = python(sys.version_info[1])
    install, compile_ = AIDER.commands("0.86.2", here)
    assert compile_.argv[0] == sys.executable
    site = tmp_path / "site"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    (site / "pkg" / "legacy.py").write_text("print 'python 2'\n")
    done = subprocess.run(compile_.resolved(tmp_path), capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    [made] = (site / "pkg" / "__pycache__").iterdir()
    assert made.name.startswith("__init__.cpython-3") and made.suffix == ".pyc"
    flags = int.from_bytes(made.read_bytes()[4:8], "little")
    assert flags == 0b01, "checked by hash, not time: a copy of the tree keeps it valid"
    assert "compile" not in " ".join(install.argv)


@pytest.mark.parametrize(
    ("target", "problem"),
    [
        (None, "aider needs python3 ≥ 3.10 and ≤ 3.12 in the environment, and it has no python3"),
        (python(9), "aider needs python3 ≥ 3.10 and ≤ 3.12, and the environment's python3 is 3.9"),
        (python(13), "aider needs python3 ≥ 3.10 and ≤ 3.12, and the environment's python3 is 3.13"),
        (python(12, libc="musl"), "aider runs from manylinux wheels; the environment's C library is musl"),
        (python(12), None),
    ],
)
def test_an_environment_that_cannot_run_a_pip_agent_is_named(
    target: PythonTarget | None, problem: str | None
) -> None:
    assert AIDER.problem(target) == problem


def test_aider_is_told_what_its_model_is_so_it_downloads_no_model_table() -> None:
    params = AiderParams.model_validate(ENDPOINT)
    assert json.loads(model_metadata(params)) == {
        'openai/team/sft"x': {"litellm_provider": "openai", "mode": "chat"}
    }


def test_codex_is_configured_for_one_provider_without_writing_its_key() -> None:
    params = CodexParams.model_validate({**ENDPOINT, "REASONING_EFFORT": "high"})
    text = codex_config(params, SERVERS)
    config = tomllib.loads(text)
    assert config["model"] == 'team/sft"x' and config["model_provider"] == "envloop"
    provider = config["model_providers"]["envloop"]
    assert provider == {
        "name": "envloop",
        "base_url": "http://gateway:8000/v1",
        "wire_api": "responses",
        "env_key": "MODEL_API_KEY",
    }
    assert config["model_reasoning_effort"] == "high"
    assert config["mcp_servers"]["probe"] == {"command": "python3", "args": ["/app/probe.py", "--flag"]}
    assert config["mcp_servers"]["web"] == {"url": "http://mcp:9000/mcp"}
    assert "sk-hidden" not in text


def test_opencode_is_configured_for_one_model_without_writing_its_key() -> None:
    params = OpenCodeParams.model_validate({**ENDPOINT, "TEMPERATURE": "0.5"})
    config = json.loads(opencode_config(params, 7, SERVERS))
    assert config["model"] == config["small_model"] == 'envloop/team/sft"x'
    assert config["provider"]["envloop"]["options"] == {
        "baseURL": "http://gateway:8000/v1",
        "apiKey": "{env:MODEL_API_KEY}",
    }
    assert config["agent"]["build"] == {"steps": 7, "temperature": 0.5}
    assert config["mcp"]["probe"]["command"] == ["python3", "/app/probe.py", "--flag"]
    assert config["mcp"]["web"] == {"type": "remote", "url": "http://mcp:9000/mcp", "enabled": True}
    assert "sk-hidden" not in json.dumps(config)


def test_qwen_codes_mcp_servers_use_its_keys_per_transport() -> None:
    config = json.loads(qwen_mcp_config(SERVERS))["mcpServers"]
    assert config == {
        "probe": {"command": "python3", "args": ["/app/probe.py", "--flag"]},
        "web": {"httpUrl": "http://mcp:9000/mcp"},
    }


HOSTILE_LINES = [
    "not json",
    "[1, 2]",
    '"a string"',
    '{"type": "item.completed", "item": "nope"}',
    '{"type": "item.completed", "item": {"type": "command_execution", "exit_code": "zero", "command": 5}}',
    '{"type": "tool_use", "part": {"state": {"input": [1], "metadata": {"exit": true}}}}',
    '{"type": "step_finish", "part": {"tokens": {"input": "many", "cache": 3}}}',
    '{"type": "assistant", "message": {"content": [{"type": "tool_use", "input": "x"}], "usage": []}}',
    '{"type": "user", "message": {"content": [{"type": "tool_result", "content": {"x": 1}}]}}',
    '{"type": "result", "subtype": 7, "usage": "none"}',
]


@pytest.mark.parametrize("reader", [CodexEvents, OpenCodeEvents, QwenEvents])
def test_a_cli_output_of_the_wrong_shape_is_read_without_failing(reader: type) -> None:
    recorder = TrajectoryRecorder("trl_x", "envloop/shell@1", "agent")
    summary = ModelRequestSummary(protocol="openai", endpoint="http://e/v1", model="m", messages=1)
    events = reader(recorder, summary, True)
    for line in HOSTILE_LINES:
        events.feed(line)
    events.finish()
    for step in recorder.trajectory.steps:
        assert isinstance(step, ModelStep | ToolStep)
        if isinstance(step, ToolStep):
            assert step.exit_code is None or isinstance(step.exit_code, int)
