"""What makes environments: the provider Protocol.

A provider's `instance(task, spec)` is the one method it must have. It may also say which
environment's task features it honours (`honours = "docker"`, environments/features.py) and offer
`verifier_instance(task, spec, step, task_image=…)` for separate verifiers. A provider that says
nothing runs only tasks with no such feature.
"""

from contextlib import AbstractAsyncContextManager
from typing import Protocol

from envloop.core.trial import TrialSpec
from envloop.environments.contract import Environment
from envloop.tasks.model import HarborTask


class EnvironmentProvider(Protocol):
    """Makes instances (see the module's docstring for what else a provider may offer)."""

    def instance(self, task: HarborTask, spec: TrialSpec) -> AbstractAsyncContextManager[Environment]:
        """A fresh instance; leaving the context kills every process it started and deletes it."""
        ...
