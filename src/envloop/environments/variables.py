"""The variables every trial command sees, and the checks every value passes before it is set.

Set once for every provider (environments/contract.py): a task's `[environment] env` (its `${NAME}`
references filled from the profile), then envloop's own trial variables, which nothing a task sets
can override. A name that is not a shell identifier, or a value with a NUL, is refused: either would
be rewritten or cut by the time it reaches the command, so the command would not see what was set.
"""

import re
from collections.abc import Mapping

from envloop.core.trial import TrialSpec
from envloop.environments.base import EnvironmentSetupError, VisiblePaths
from envloop.tasks.dockerfile import without_empty_entries
from envloop.tasks.model import HarborTask
from envloop.tasks.variables import resolve_env

VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""A shell identifier, the only name a variable can be set under unchanged (matched whole)."""


def checked_env(env: Mapping[str, str]) -> dict[str, str]:
    """Variables as the trial will see them: valid names, no NUL, no empty `*PATH` entries."""
    checked: dict[str, str] = {}
    for name, value in env.items():
        if not VARIABLE_NAME.fullmatch(name) or "\0" in value:
            raise EnvironmentSetupError(
                f"environment variable {name[:60]!r} cannot be set (bad name or value)"
            )
        checked[name] = without_empty_entries(name, value)
    return checked


def trial_variables(spec: TrialSpec, visible: VisiblePaths) -> dict[str, str]:
    """What a command may rely on to find its trial and the instance's directories."""
    return {
        "ENVLOOP_JOB_ID": spec.job_id,
        "ENVLOOP_TRIAL_ID": spec.trial_id,
        "ENVLOOP_TASK": spec.task_name,
        "ENVLOOP_ATTEMPT": str(spec.attempt),
        "ENVLOOP_APP_DIR": visible.app,
        "ENVLOOP_LOGS_DIR": visible.logs,
        "ENVLOOP_TESTS_DIR": visible.tests,
        "ENVLOOP_SOLUTION_DIR": visible.solution,
    }


def instance_variables(
    defaults: Mapping[str, str], task: HarborTask, spec: TrialSpec, visible: VisiblePaths
) -> dict[str, str]:
    """What every command of an instance sees: the provider's `defaults`, then the task's
    `[environment] env`, then the trial variables, which win over both; checked."""
    return checked_env(
        {
            **defaults,
            **resolve_env(task.config.environment.env, spec.params),
            **trial_variables(spec, visible),
        }
    )
