"""`${NAME}` references in a task's env sections: the variables a profile must provide.

A task that needs, say, an API key for its verifier writes `KEY = "${JUDGE_API_KEY}"` in
`[verifier] env`; the value comes from the profile's params (secret ones stay masked), never from
the host's environment, so a trial sees only what its job was given.
"""

import re
from collections.abc import Iterable, Mapping

from envloop.tasks.model import HarborTask

_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def referenced_variables(task: HarborTask) -> list[str]:
    return sorted(_names((task.config.environment.env, task.config.verifier.env)))


def resolve_env(env: Mapping[str, str], params: Mapping[str, str]) -> dict[str, str]:
    """Substitute `${NAME}` from the profile params (submission has checked that each exists)."""
    return {key: _REFERENCE.sub(lambda m: params.get(m.group(1), ""), value) for key, value in env.items()}


def verifier_only_variables(task: HarborTask) -> frozenset[str]:
    """The `${NAME}`s only the task's verifiers name (`[verifier] env`, a verifier environment's
    `env`, a step's): an LLM judge's key. The agent phase never gets them as variables, since
    whatever an agent holds, a hostile agent can use or leak."""
    verifier = [task.config.verifier, *(step.config.verifier for step in task.steps)]
    for_verifier = [section.env for section in verifier]
    for_verifier += [section.environment.env for section in verifier if section.environment is not None]
    for_agent = [task.config.environment.env, task.config.solution.env]
    return frozenset(_names(for_verifier) - _names(for_agent))


def _names(sections: Iterable[Mapping[str, str]]) -> set[str]:
    return {name for env in sections for value in env.values() for name in _REFERENCE.findall(value)}
