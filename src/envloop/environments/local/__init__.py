"""The `local` environment: a bubblewrap sandbox on this host, or a plain process group.

`provider` makes instances, `environment` is one instance (its commands started through the native
launcher, `launch` and `native`, in cgroups of its own, `cgroup2` and `limits`), `instance` lays
out its host directories, `quota` bounds their disk, `bwrap`, `identity` and `public_egress` build
the sandbox's walls. See docs/design/environment-contract.md for what a provider implements.
"""

from envloop.environments.local.environment import LocalEnvironment
from envloop.environments.local.limits import Limits
from envloop.environments.local.provider import SANDBOX_VARIABLE, LocalEnvironmentProvider

__all__ = ["SANDBOX_VARIABLE", "Limits", "LocalEnvironment", "LocalEnvironmentProvider"]
