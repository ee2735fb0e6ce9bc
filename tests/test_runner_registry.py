"""Runner references, declared params, and the param checks submission relies on."""

import pytest

from envloop.runners import ShellRunner, UnknownRunnerError, get_runner, list_runners


def test_shell_runner_is_found_by_its_reference() -> None:
    runner = get_runner("envloop/shell@1")
    assert (runner.ref, runner.task_kind) == ("envloop/shell@1", "harbor")


def test_unknown_reference_is_a_clear_value_error() -> None:
    with pytest.raises(
        UnknownRunnerError,
        match=r"unknown runner 'envloop/shell@9' \(known: envloop/chat@1, envloop/shell@1\)",
    ):
        get_runner("envloop/shell@9")
    assert issubclass(UnknownRunnerError, ValueError)


def test_list_runners_describes_params_read_and_required() -> None:
    chat, info = list_runners()
    assert (chat.ref, chat.task_kind) == ("envloop/chat@1", "chat")
    assert chat.params.required == ["MODEL_PROTOCOL", "MODEL_BASE_URL", "MODEL_NAME"]
    assert info.ref == "envloop/shell@1"
    assert info.params.required == ["AGENT_NAME"]
    assert {"AGENT_NAME", "AGENT_COMMAND", "NETWORK", "MODEL_BASE_URL", "MAX_STEPS"} <= set(info.params.read)


@pytest.mark.parametrize(
    ("params", "problems"),
    [
        ({}, ["AGENT_NAME is required"]),
        ({"AGENT_NAME": "foo"}, ["unknown agent 'foo' (known: claude-code, command, envloop, nop, oracle)"]),
        ({"AGENT_NAME": "command"}, ["AGENT_COMMAND is required when AGENT_NAME=command"]),
        ({"AGENT_NAME": "command", "AGENT_COMMAND": "./run-agent"}, []),
        ({"AGENT_NAME": "oracle"}, []),
    ],
)
def test_check_params_names_each_problem(params: dict[str, str], problems: list[str]) -> None:
    assert ShellRunner().check_params(params) == problems


def test_params_an_agent_ignores_are_reported_unread() -> None:
    runner = ShellRunner()
    assert runner.unread_params({"AGENT_NAME": "nop", "MODEL_NAME": "m", "AGENT_COMMAND": "x"}) == [
        "AGENT_COMMAND",
        "MODEL_NAME",
    ]
    assert runner.unread_params({"AGENT_NAME": "command", "AGENT_COMMAND": "x", "MODEL_NAME": "m"}) == []
