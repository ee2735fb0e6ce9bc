"""`${NAME}` references in a task's env sections: the variables a profile must provide.

A task that needs, say, an API key for its verifier writes `KEY = "${JUDGE_API_KEY}"` in
`[verifier] env`; the value comes from the profile's params (secret ones stay masked), never from
the host's environment, so a trial sees only what its job was given.
"""

import re
from collections.abc import Mapping

from envloop.tasks.model import HarborTask

_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def referenced_variables(task: HarborTask) -> list[str]:
    sections = (task.config.environment.env, task.config.verifier.env)
    return sorted({name for env in sections for value in env.values() for name in _REFERENCE.findall(value)})


def resolve_env(env: Mapping[str, str], params: Mapping[str, str]) -> dict[str, str]:
    """Substitute `${NAME}` from the profile params (submission has checked that each exists)."""
    return {key: _REFERENCE.sub(lambda m: params.get(m.group(1), ""), value) for key, value in env.items()}
