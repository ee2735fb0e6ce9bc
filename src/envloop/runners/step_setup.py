"""A multi-step task's per-step inputs, as Harbor applies them before the step's agent.

Files under `steps/<name>/workdir/` are uploaded into the working directory (overwriting what an
earlier step left at the same names); a `setup.sh` among them then runs there, as the step's agent
user. A setup that fails leaves the environment other than the step expects: the trial stops with
an `environment_error` naming the script, and neither the step's agent nor its verifier runs.
"""

from pathlib import Path

from envloop.core.status import ErrorType
from envloop.core.trial import TrialError
from envloop.environments import Environment, EnvironmentSetupError
from envloop.tasks.model import TaskStep

SETUP_SCRIPT = "setup.sh"
_TAIL_CHARS = 300


def step_inputs(step: TaskStep) -> list[tuple[str, Path]]:
    """The step's workdir files by their path below the working directory; links and special
    files are not uploaded."""
    source = step.root / "workdir"
    if not source.is_dir() or source.is_symlink():
        return []
    return [
        (path.relative_to(source).as_posix(), path)
        for path in sorted(source.rglob("*"))
        if path.is_file() and not path.is_symlink()
    ]


async def prepare_step(
    environment: Environment, step: TaskStep, timeout: float, captures: Path
) -> TrialError | None:
    """Upload the step's workdir and run its setup.sh; the error that stops the trial, if any."""
    inputs = step_inputs(step)
    app = environment.visible.app.rstrip("/")
    where = f"steps/{step.name}/workdir"
    try:
        for relative, path in inputs:
            await environment.write_file(f"{app}/{relative}", path.read_bytes())
        if not any(relative == SETUP_SCRIPT for relative, _ in inputs):
            return None
        result = await environment.exec(
            ["bash", f"{app}/{SETUP_SCRIPT}"],
            cwd=app,
            timeout=timeout,
            stdout_path=captures / "stdout.txt",
            stderr_path=captures / "stderr.txt",
        )
    except (EnvironmentSetupError, OSError) as exc:
        return TrialError(type=ErrorType.ENVIRONMENT_ERROR, message=f"{where} could not be applied: {exc}")
    if result.timed_out:
        message = f"{where}/{SETUP_SCRIPT} exceeded its {timeout:g} s timeout; the step did not start"
        return TrialError(type=ErrorType.ENVIRONMENT_ERROR, message=message)
    if result.exit_code != 0:
        output = " ".join((result.stderr or result.stdout).split())[-_TAIL_CHARS:]
        message = f"{where}/{SETUP_SCRIPT} exited with code {result.exit_code}" + (
            f" ({output})" if output else ""
        )
        return TrialError(type=ErrorType.ENVIRONMENT_ERROR, message=message + "; the step did not start")
    return None
