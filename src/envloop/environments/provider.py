"""What makes environments: the provider Protocol, and how the catalog holds one provider.

A provider's `instance(task, spec)` is the one method it must have. It may also say which
environment's task features it honours (`honours = "docker"`, environments/features.py), offer
`verifier_instance(task, spec, step, task_image=…)` for separate verifiers, and sweep what its
instances leave behind when a worker dies (`sweep_leftovers`). A provider that says nothing runs
only tasks with no such feature and leaves nothing behind.

The built-in providers and the plugins' are found the same way, through `ProviderEntry`s in the
one catalog (environments/catalog.py); a worker sweeps every entry's leftovers when it starts
(environments/leftovers.py), so the scheduler names no provider. See
docs/design/environment-contract.md.
"""

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

from envloop.core.trial import TrialSpec
from envloop.environments.contract import Environment
from envloop.tasks.model import HarborTask

Sweep = Callable[[], Awaitable[list[str]]]
"""Remove what instances of workers on this host that are gone left behind (containers, networks);
the names of what was removed. Nothing to sweep (no daemon answers) is an empty list, not an error."""


class EnvironmentProvider(Protocol):
    """Makes instances (see the module's docstring for what else a provider may offer)."""

    def instance(self, task: HarborTask, spec: TrialSpec) -> AbstractAsyncContextManager[Environment]:
        """A fresh instance; leaving the context kills every process it started and deletes it."""
        ...


@dataclass(frozen=True)
class ProviderEntry:
    """One provider as the catalog holds it: how a trial gets it, and what it needs of the worker.

    `make` takes the trial's spec because a provider may keep state per worker (Docker's build
    records live in the spec's builds directory); it must not import anything heavy before it is
    called, since a job's submission only checks that the name is known. `ready` says whether the
    provider can run a trial on this worker now (`auto` asks it before choosing a container), None
    when it always can. `sweep_leftovers` is the worker's start-up sweep, None when instances leave
    nothing a dead worker could not remove; `close_shared` its last step."""

    make: Callable[[TrialSpec], EnvironmentProvider]
    ready: Callable[[], Awaitable[bool]] | None = None
    sweep_leftovers: Sweep | None = None
    close_shared: Callable[[], Awaitable[list[str]]] | None = None
    """What the worker's trials shared (Docker's bridges and egress proxies), removed when the worker
    stops; the problems met, if any. None when trials share nothing that outlives them."""
