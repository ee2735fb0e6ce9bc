"""Runners: versioned harnesses that take one trial from environment setup to teardown."""

from envloop.runners.base import ComponentInfo, Runner, RunnerInfo, TaskKind
from envloop.runners.registry import UnknownRunnerError, get_runner, list_runners
from envloop.runners.shell import ShellRunner

__all__ = [
    "ComponentInfo",
    "Runner",
    "RunnerInfo",
    "ShellRunner",
    "TaskKind",
    "UnknownRunnerError",
    "get_runner",
    "list_runners",
]
