"""Runner references → runners. A reference names an exact, versioned behaviour (`envloop/shell@1`)."""

from envloop.runners.base import Runner, RunnerInfo
from envloop.runners.chat import ChatRunner
from envloop.runners.shell import ShellRunner


class UnknownRunnerError(ValueError):
    """A runner reference that this installation does not provide."""


_FACTORIES: dict[str, type[Runner]] = {ShellRunner.ref: ShellRunner, ChatRunner.ref: ChatRunner}


def get_runner(ref: str) -> Runner:
    factory = _FACTORIES.get(ref)
    if factory is None:
        known = ", ".join(sorted(_FACTORIES))
        raise UnknownRunnerError(f"unknown runner {ref!r} (known: {known})")
    return factory()


def list_runners() -> list[RunnerInfo]:
    infos = []
    for ref in sorted(_FACTORIES):
        runner = get_runner(ref)
        infos.append(
            RunnerInfo(
                ref=runner.ref,
                task_kind=runner.task_kind,
                description=runner.description,
                params=runner.params_info(),
            )
        )
    return infos
