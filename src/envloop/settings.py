"""Every `ENVLOOP_*` variable the operator may set, in one typed model: its type, default and
meaning live here and nowhere else (docs/reference/environment.md is written from this model).

`settings()` validates the environment as it is when called, so a test or a process that changes
a variable sees the new value; the result is cached per set of `ENVLOOP_*` values, so readers on
hot paths pay one scan of the environment. A bad value raises SettingsError, a UserError whose one
line names the variable (and the CLI option it is the default of). `el` validates once before any
command runs, so a bad value stops the command before anything is created (exit code 2).

The model is a plain pydantic model given the `ENVLOOP_*` values (prefix removed, any case, an
empty one unset): all a settings library would do here, without the import time it would add to
every `el` command. Light to import (no store, no sandbox): the CLI reads it before anything else.

Beside it: setting_addresses.py parses the two settings that are addresses (the store's URL, the
DNS resolvers), and set_for_trials.py lists the `ENVLOOP_*` variables envloop sets inside trials,
which share the prefix but are not settings.
"""

import functools
import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from envloop.errors import UserError
from envloop.setting_addresses import driver_url, upstream_address

PREFIX = "ENVLOOP_"

WHERE = "Where things live"
CLIENTS = "The CLI and clients"
WORKERS = "Workers and the server"
TRIALS = "Trials: the operator's settings"
DOCKER = "Docker"
SETUP = "Setup and tests"
GROUPS = (WHERE, CLIENTS, WORKERS, TRIALS, DOCKER, SETUP)
"""The sections of the reference page, in its order."""

UNECHOED = ("database_url", "secret_key")
"""Settings an error never repeats the value of: they may hold a password or a key."""
PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]


def setting(
    default: Any,
    group: str,
    meaning: str,
    *,
    shown: str | None = None,
    option: str | None = None,
    trial: bool = False,
) -> Any:
    """A field of Settings. `shown` is the default as the reference page says it (when the code
    computes it); `option` the CLI option the variable is the default of; `trial` marks what a
    trial reads wherever it runs, which the Ray executor forwards to its nodes."""
    extra: dict[str, Any] = {"group": group, "trial": trial}
    if shown is not None:
        extra["shown"] = shown
    if option is not None:
        extra["option"] = option
    return Field(default=default, description=meaning, json_schema_extra=extra)


class Settings(BaseModel):
    """The operator's settings, read from `ENVLOOP_<FIELD>` variables; an empty one is unset."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    home: Path | None = setting(
        None,
        WHERE,
        "the embedded store, artifacts, secret key and price table of one user (created 0700)",
        shown="`~/.envloop`",
    )
    database_url: str | None = setting(
        None,
        WHERE,
        "the store: `sqlite:///PATH` or `postgresql://…` (a team)",
        shown="SQLite in WAL mode under `ENVLOOP_HOME`",
    )
    artifacts: str | None = setting(
        None,
        WHERE,
        "the artifact store: a path or an fsspec URL such as `s3://bucket/prefix` "
        "([Scaling out](../guides/scaling-out.md#shared-artifact-store))",
        shown="`ENVLOOP_HOME/artifacts`",
    )
    secret_key: SecretStr | None = setting(
        None,
        WHERE,
        "keys that encrypt profile secrets, comma-separated, newest first "
        "([Security](../operators/security.md#secrets))",
    )
    secret_key_file: Path | None = setting(
        None,
        WHERE,
        "the key file used when `ENVLOOP_SECRET_KEY` is unset",
        shown="`ENVLOOP_HOME/secret.key`",
    )
    prices: Path | None = setting(
        None,
        WHERE,
        "the operator's price table ([Comparing runs](../guides/comparing-runs.md#tokens-cost-and-latency))",
        shown="`ENVLOOP_HOME/prices.toml`",
    )

    url: str | None = setting(
        None, CLIENTS, "a server's address: every `el` command then talks to it instead of the embedded store"
    )
    api_key: SecretStr | None = setting(None, CLIENTS, "the key (or share token) sent to `ENVLOOP_URL`")
    debug: bool = setting(
        False,
        CLIENTS,
        "`1` shows the traceback of an internal error (exit code 1) instead of one line",
        shown="unset",
    )

    worker_capacity: int | None = setting(
        None,
        WORKERS,
        "trials a worker runs at once ([Scaling out](../guides/scaling-out.md#workers-and-capacity))",
        shown="max(2, cores)",
        option="--capacity",
    )
    worker_processes: int | None = setting(
        None,
        WORKERS,
        "processes a local worker shares its capacity among",
        shown="one per core, at least two trials each",
        option="--processes",
    )
    plugin_modules: tuple[str, ...] = setting(
        (),
        WORKERS,
        "modules whose `module:Name` references profiles may name, comma-separated "
        "([plugins](../guides/profiles-and-plugins.md#modulename-references))",
        shown="unset",
    )
    max_upload_mb: int = setting(
        256, WORKERS, "the largest dataset upload `el serve` accepts (its archive may unpack to twice that)"
    )
    model_private_upstream: Literal["allow", "deny"] = setting(
        "allow",
        WORKERS,
        "whether the model gateway may forward to a model endpoint on a private address "
        "([the model gateway](../guides/models.md#the-model-gateway))",
        shown="`allow`; `deny` for workers of `el serve` beyond loopback",
        trial=True,
    )
    worker_host: str | None = setting(
        None,
        WORKERS,
        "which host a worker counts as when it removes the containers of workers of its host that died "
        "(set it where several hosts share a hostname and a daemon)",
        shown="the host's name",
    )
    agent_cache: Path | None = setting(
        None,
        WORKERS,
        "where a worker installs each agent CLI version once, shared by later trials "
        "([Agent CLIs](../guides/agents.md))",
        shown="`agents/` under `ENVLOOP_HOME`",
    )

    sandbox: Literal["auto", "bwrap", "plain"] = setting(
        "auto", TRIALS, "`auto`/`bwrap`: bubblewrap or nothing; `plain`: no isolation", trial=True
    )
    max_memory_mb: int = setting(8192, TRIALS, "ceiling over a task's `memory_mb`", trial=True)
    max_cpus: PositiveFloat | None = setting(
        None, TRIALS, "ceiling over a task's `cpus`", shown="all CPUs", trial=True
    )
    max_disk_mb: int = setting(10240, TRIALS, "ceiling over a task's `storage_mb`", trial=True)
    max_timeout_sec: PositiveFloat = setting(
        4 * 3600.0, TRIALS, "ceiling over every agent and verifier timeout", shown="14400", trial=True
    )
    trial_network: Literal["task", "none"] = setting(
        "task", TRIALS, "`none` gives no trial a network", trial=True
    )
    verifier_environment: Literal["task", "separate"] = setting(
        "task", TRIALS, "`separate` runs every verifier of docker trials in a fresh container", trial=True
    )
    cgroup2_root: Path | None = setting(
        None, TRIALS, "a cgroup v2 mount to use instead of v1 groups", trial=True
    )
    launcher: Literal["shell"] | None = setting(
        None,
        TRIALS,
        "`shell` runs the sandbox's launch steps as a `/bin/sh` prefix and `setpriv` instead of the "
        "compiled launcher ([Security](../operators/security.md#how-the-sandbox-keeps-it))",
        trial=True,
    )

    docker: str | None = setting(
        None, DOCKER, "the docker client used for image builds", shown="`/usr/bin/docker`", trial=True
    )
    docker_build_network: Literal["default", "host", "none"] | None = setting(
        None,
        DOCKER,
        "the network of `RUN` steps: `default`, `host` or `none`",
        shown="`default` with a bridge, else `none`",
        trial=True,
    )
    docker_build_timeout_sec: PositiveFloat = setting(
        1800.0, DOCKER, "the longest an image build may take", shown="1800", trial=True
    )
    image_substitutes: str = setting(
        "",
        DOCKER,
        "`FROM=TO` pairs, comma-separated: build tasks naming an image this machine cannot have "
        "on one it has",
        shown="unset",
        trial=True,
    )
    debian_mirror: str | None = setting(
        None,
        DOCKER,
        "where `scripts/docker-base-images` fetches the Debian base image's packages",
        shown="the machine's Debian mirror",
    )
    ubuntu_mirror: str | None = setting(
        None,
        DOCKER,
        "where `scripts/docker-base-images` fetches the Ubuntu base image's packages",
        shown="Ubuntu's archive",
    )
    dns_upstream: tuple[str, ...] = setting(
        (),
        DOCKER,
        "the resolvers a public trial's own lookups are forwarded to (and logged on the way), "
        "`ADDRESS[:PORT]` comma-separated",
        shown="the host's, from `/etc/resolv.conf`",
        trial=True,
    )
    dockerd_dir: Path = setting(
        Path("/tmp/envloop-dockerd"),
        DOCKER,
        "pidfile and log of the daemon `scripts/docker-daemon` starts",
    )

    extras: str = setting("dev,local-model,ray", SETUP, "the extras `scripts/setup` installs")
    test_workers: int = setting(3, SETUP, "the test processes `scripts/test` runs (pytest-xdist)")
    test_agent_cache: Path | None = setting(
        None,
        SETUP,
        "where the agent CLI tests install each CLI once; keep it between CI runs",
        shown="`/usr/local/lib/envloop-test-agents` (root)",
    )
    test_postgres_url: str | None = setting(
        None,
        SETUP,
        "the PostgreSQL server the tests that run on both stores use",
        shown="a throwaway server `scripts/test` starts",
    )

    @field_validator(
        "worker_capacity", "worker_processes", "max_upload_mb", "max_memory_mb", "max_disk_mb", "test_workers"
    )
    @classmethod
    def _positive(cls, value: int | None) -> int | None:
        if value is not None and value < 1:
            raise ValueError("expected a whole number of at least 1")
        return value

    @field_validator("database_url")
    @classmethod
    def _store_scheme(cls, value: str | None) -> str | None:
        if value is not None:
            driver_url(value)  # a ValueError says what is expected, without the value
        return value

    @field_validator("plugin_modules", "dns_upstream", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("dns_upstream")
    @classmethod
    def _resolver_addresses(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for entry in value:
            upstream_address(entry)  # a ValueError says what is expected
        return value

    def trial_environ(self) -> dict[str, str]:
        """The trial settings that were set, as variables: what a node that runs this worker's
        trials elsewhere (Ray) must see. The store, the secret key and the home stay here."""
        return {
            env_name(name): _as_text(getattr(self, name))
            for name in sorted(self.model_fields_set)
            if _extra(name)["trial"]
        }


class SettingsError(UserError):
    """An `ENVLOOP_*` variable holds a value its setting refuses; the message names it."""


def env_name(field: str) -> str:
    """The variable of a Settings field: `worker_capacity` is ENVLOOP_WORKER_CAPACITY."""
    return PREFIX + field.upper()


def settings() -> Settings:
    """The settings of the environment as it is now (cached while no `ENVLOOP_*` value changes).

    A trial reads them a few times: the names are scanned and only ours looked up, a third of the
    cost of walking every variable's value (`os.environ.items()` decodes each one)."""
    environ = os.environ
    return _validated(tuple(sorted((k, environ[k]) for k in environ if k.upper().startswith(PREFIX))))


@functools.lru_cache(maxsize=8)
def _validated(environ: tuple[tuple[str, str], ...]) -> Settings:
    """The settings of these `ENVLOOP_*` variables (also the cache key); the other variables of the
    same prefix (those set for trials, see set_for_trials.py) are ignored."""
    values = {name[len(PREFIX) :].lower(): value for name, value in environ if value}
    try:
        return Settings.model_validate(values)
    except ValidationError as exc:
        raise SettingsError(_one_line(exc, values)) from None


def _one_line(exc: ValidationError, values: dict[str, str]) -> str:
    """`NAME='value': what is wrong (the default of --option)` for the first refused value."""
    error = exc.errors(include_url=False)[0]
    field = str(error["loc"][0]) if error["loc"] else ""
    raw = values.get(field, "")
    reason = str(error["msg"]).removeprefix("Value error, ")
    option = _extra(field).get("option") if field in Settings.model_fields else None
    hint = f" (the default of {option})" if option else ""
    named = env_name(field) if field in UNECHOED else f"{env_name(field)}={raw[:40]!r}"
    return f"{named}: {reason[:1].lower()}{reason[1:]}{hint}"


def _extra(field: str) -> dict[str, Any]:
    extra = Settings.model_fields[field].json_schema_extra
    assert isinstance(extra, dict)
    return extra


def _as_text(value: object) -> str:
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)
