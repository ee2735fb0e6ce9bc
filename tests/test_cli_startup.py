"""`el` imports only what the command it runs needs, so every command starts quickly.

`el --help` lists the top-level names from stand-ins that carry their one-line help; `el GROUP
--help` imports that group's command module, which imports the store, the sandbox, the web stack
and the model SDKs only inside the commands that use them. These tests read the module list of a
real `el` process (speed itself is measured by bench/startup.py, not asserted here).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from envloop.cli import main
from tests.conftest import El, make_task, write_profile

SRC = Path(__file__).resolve().parents[1] / "src"
STORE_SANDBOX_SDKS = (
    "sqlalchemy",
    "envloop.store",
    "envloop.services.context",
    "envloop.environments",
    "envloop.scheduling",
    "envloop.runners",
    "envloop.agents",
    "openai",
    "anthropic",
    "fastapi",
    "uvicorn",
)
LIGHT_CLI = {"envloop.cli.main", "envloop.cli.exits", "envloop.cli.pid_one"}
PROBE = """
import json, runpy, sys
sys.argv = ["el", *json.loads(sys.argv[1])]
try:
    runpy.run_module("envloop", run_name="__main__")
except SystemExit as exc:
    code = exc.code
else:
    code = 0
sys.stderr.write("\\n" + json.dumps({"code": code, "modules": sorted(sys.modules)}) + "\\n")
"""


def el_modules(home: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, set[str]]:
    """Exit code and loaded modules of `el ARGS` run in a fresh interpreter."""
    inherited = {k: v for k, v in os.environ.items() if k not in ("ENVLOOP_URL", "ENVLOOP_DATABASE_URL")}
    full_env = {**inherited, "PYTHONPATH": str(SRC), "ENVLOOP_HOME": str(home), **(env or {})}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args)],
        capture_output=True,
        text=True,
        env=full_env,
        check=False,
        timeout=120,
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return report["code"], set(report["modules"])


def loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted({n for n in names for m in modules if m == n or m.startswith(n + ".")})


def test_el_help_loads_no_command_module_and_not_even_pydantic(tmp_path: Path) -> None:
    code, modules = el_modules(tmp_path, "--help")
    assert code == 0
    assert loaded(modules, (*STORE_SANDBOX_SDKS, "pydantic", "httpx", "rich")) == []
    assert not [m for m in modules if m.startswith("envloop.cli.") and m not in LIGHT_CLI]


GROUPS = ["dataset", "profile", "runner", "job", "trial", "leaderboard", "key", "secret", "model"]
COMMANDS = [
    "plan",
    "serve",
    "worker",
    "job result",
    "job list",
    "job submit",
    "dataset build",
    "trial logs",
    "model serve",
]


@pytest.mark.parametrize("args", GROUPS + COMMANDS)
def test_help_of_a_group_or_command_loads_no_store_sandbox_web_or_sdk(tmp_path: Path, args: str) -> None:
    code, modules = el_modules(tmp_path, *args.split(), "--help")
    assert code == 0
    assert loaded(modules, STORE_SANDBOX_SDKS) == []


def test_a_command_against_a_server_loads_the_http_client_but_not_the_store(tmp_path: Path) -> None:
    """Nothing listens on port 9: the command fails to connect (exit 4), having loaded only what a
    client needs."""
    code, modules = el_modules(tmp_path, "job", "result", "job_x", env={"ENVLOOP_URL": "http://127.0.0.1:9"})
    assert code == 4
    assert "envloop.client" in modules
    assert loaded(modules, STORE_SANDBOX_SDKS) == []


def test_a_submission_to_a_server_checks_its_config_file_without_the_store(tmp_path: Path) -> None:
    """`el job submit --config FILE` reads and checks the file against the wire model: against a
    server (none listens on port 9: exit 4 once the request is sent) it loads no SQLAlchemy, no
    service layer and no background worker; a malformed file is refused the same way (exit 2)."""
    config = tmp_path / "job.json"
    config.write_text('{"dataset": "demo@1", "profiles": ["nop@1"], "attempts": 2}', encoding="utf-8")
    server = {"ENVLOOP_URL": "http://127.0.0.1:9"}
    code, modules = el_modules(tmp_path, "job", "submit", "--config", str(config), "--tag", "a=b", env=server)
    assert code == 4
    assert "envloop.wire.jobs" in modules
    assert loaded(modules, (*STORE_SANDBOX_SDKS, "envloop.services", "envloop.local")) == []
    config.write_text('{"dataset": "demo@1", "profiles": ["nop@1"], "attempts": 0}', encoding="utf-8")
    code, modules = el_modules(tmp_path, "job", "submit", "--config", str(config), env=server)
    assert code == 2
    assert loaded(modules, (*STORE_SANDBOX_SDKS, "envloop.services", "envloop.local")) == []


def test_a_profile_created_on_a_server_is_read_from_its_file_without_the_store(tmp_path: Path) -> None:
    """`el profile create --file FILE` against a server reads the file with the wire model alone
    (exit 4: nothing listens on port 9); a malformed file is refused the same way (exit 2)."""
    profile = write_profile(tmp_path / "p.json", {"AGENT_NAME": "nop"})
    server = {"ENVLOOP_URL": "http://127.0.0.1:9"}
    code, modules = el_modules(
        tmp_path, "profile", "create", "team/p", "1", "--file", str(profile), env=server
    )
    assert code == 4
    assert "envloop.wire.profiles" in modules
    assert loaded(modules, (*STORE_SANDBOX_SDKS, "envloop.services", "envloop.local")) == []
    profile.write_text("{", encoding="utf-8")
    code, modules = el_modules(
        tmp_path, "profile", "create", "team/p", "1", "--file", str(profile), env=server
    )
    assert code == 2
    assert loaded(modules, (*STORE_SANDBOX_SDKS, "envloop.services", "envloop.local")) == []


READS = [("job list", 0), ("job result job_x", 2), ("trial get trl_x", 2)]


@pytest.mark.parametrize(("args", "exit_code"), READS)
def test_an_embedded_read_loads_the_store_but_not_the_runners_sandbox_web_stack_or_sdks(
    tmp_path: Path, args: str, exit_code: int
) -> None:
    code, modules = el_modules(tmp_path, *args.split())
    assert code == exit_code
    assert "sqlalchemy" in modules
    unneeded = ("envloop.runners", "envloop.agents", "envloop.environments", "envloop.scheduling")
    assert loaded(modules, (*unneeded, "fastapi", "uvicorn", "openai", "anthropic")) == []


DOCKER_CLIENT = (
    "httpx",
    "envloop.environments.docker.engine",
    "envloop.environments.docker.containers",
    "envloop.environments.docker.images",
    "envloop.environments.choice",
)
"""What a worker needs to run a trial in Docker, and a command that only checks names and params does
not: the runner's params are read from its module, the environment's name from the catalog."""


def test_push_profile_create_and_submit_check_runners_and_environments_without_dockers_client(
    el: El, tmp_path: Path
) -> None:
    make_task(tmp_path / "tasks", "t0", solve="touch done")
    profile = write_profile(tmp_path / "p.json", {"AGENT_NAME": "oracle"})
    commands = [
        ("dataset", "push", str(tmp_path / "tasks"), "--name", "ds"),
        ("profile", "create", "p", "1", "--file", str(profile)),
        ("job", "submit", "--dataset", "ds@1", "--profile", "p@1", "--wait"),
    ]
    for args in commands:
        code, modules = el_modules(el.home, *args)
        assert code == 0, args
        assert "envloop.runners.shell" in modules  # each checks a runner's params
        assert loaded(modules, DOCKER_CLIENT) == [], args
    # The worker that submission started ran the trial all the same.
    [job] = el.ok("job", "list", "--json").json()
    result = el.ok("job", "result", job["id"], "--json").json()
    assert (job["status"], result["profiles"]["p@1"]["score"]) == ("completed", 1.0)


def help_of(app_args: str | None, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main.build_app(app_args), list(args), prog_name="el")
    return result.exit_code, result.output


def test_the_stand_ins_list_exactly_the_help_the_real_commands_give() -> None:
    """The one-line summaries in `cli.main.ENTRIES` are the real commands' help, not a copy that
    drifted: `el --help` built from stand-ins equals the help of the fully imported app."""
    assert help_of(None, "--help") == help_of("*", "--help")


def test_every_command_lives_in_the_module_named_after_it() -> None:
    """`el job submit` in `cli/job.py`, `el job compare` in `cli/compare.py`, `el plan` in
    `cli/plan.py`: the name a user types is the module to open."""
    for entry in main.ENTRIES:
        assert entry.module == entry.name
        assert [module for _, module, _ in entry.extra] == [name for name, _, _ in entry.extra]


def test_a_mistyped_name_gets_the_same_suggestion_from_the_stand_ins() -> None:
    assert help_of(None, "jbo") == help_of("*", "jbo")


def test_a_command_of_a_group_loads_not_the_commands_other_modules_add_but_a_mistyped_one_is_offered_them(
    el: El, tmp_path: Path
) -> None:
    """`el job get` leaves `el job compare` (another module) unimported; a mistyped command still
    gets the suggestion of every command of the group."""
    code, modules = el_modules(tmp_path, "job", "get", "--help")
    assert code == 0
    assert loaded(modules, ("envloop.cli.compare", "envloop.cli.samples", "envloop.cli.result")) == []
    mistyped = el("job", "resul")
    assert mistyped.code == 2
    assert "Did you mean 'result'?" in mistyped.stderr


OTHER_OPERATIONS_MODELS = (
    "access",
    "breakdown",
    "compare",
    "datasets",
    "leaderboard",
    "planning",
    "profiles",
    "rollouts",
    "runners",
    "samples",
    "trials",
)
"""The modules of `envloop.wire` whose models neither `el job get` nor `el job result` reads."""
NOT_FOR_AN_EMBEDDED_READ = (
    "sqlalchemy",
    "alembic",
    "envloop.store.db",
    "envloop.store.tables",
    "envloop.services.jobs",
    "envloop.services.job_submission",
    "envloop.services.datasets",
    "envloop.store.secrets",
    "cryptography",
    "httpx",
    "fastapi",
    "uvicorn",
    "pydantic_settings",
    "envloop.cli.compare",
    "envloop.cli.samples",
    "envloop.cli.progress",
    "rich.progress",
    *(f"envloop.wire.{module}" for module in OTHER_OPERATIONS_MODELS),
)
"""Nor do the settings library, the other commands of the group, the progress bar or the wire models
of other operations (the declarations name every model; an operation imports its own when called)."""


@pytest.mark.parametrize("command", ["get", "result"])
def test_el_job_get_and_result_on_the_embedded_store_load_no_sqlalchemy(
    home: Path, tmp_path: Path, command: str
) -> None:
    """The home's first full opening compiled every read into its cache, so an embedded read runs
    them with `sqlite3` alone from the first: no SQLAlchemy, Alembic, tables, secrets or HTTP stack;
    and it builds only the models it reads."""
    from envloop.services.context import open_context  # noqa: PLC0415 - only to set the store up
    from tests.conftest import submit_command_job  # noqa: PLC0415

    ctx = open_context(home)
    try:
        job_id = submit_command_job(ctx, tmp_path, "true")
    finally:
        ctx.close()
    code, modules = el_modules(home, "job", command, job_id)
    assert code == 0
    assert loaded(modules, NOT_FOR_AN_EMBEDDED_READ) == []


def test_every_wire_name_is_the_model_of_the_module_that_defines_it() -> None:
    """`envloop.wire` imports a model's module when the name is first read; the table it reads
    names each exported model once, with its real module."""
    import importlib  # noqa: PLC0415

    from envloop import wire  # noqa: PLC0415

    assert set(wire.__all__) == set(wire._MODULE_OF)
    for name, module in wire._MODULE_OF.items():
        assert getattr(wire, name) is getattr(importlib.import_module(f"envloop.wire.{module}"), name)


@pytest.mark.parametrize(
    "command",
    [
        ("get",),
        ("get", "--json"),
        ("logs", "--phase", "agent"),
        ("list",),
        ("list", "--status", "completed", "--task", "t0", "--json"),
    ],
)
def test_el_trial_list_get_and_logs_on_the_embedded_store_load_no_sqlalchemy(
    home: Path, tmp_path: Path, command: tuple[str, ...]
) -> None:
    """A job's trials, a trial's view and its logs are read with `sqlite3` alone too, from the first
    (a third of a second instead of most of a second, for the commands scripts call most)."""
    from envloop.services.context import open_context  # noqa: PLC0415 - only to set the store up
    from envloop.services.trials import list_trials  # noqa: PLC0415
    from tests.conftest import run_trials, submit_command_job  # noqa: PLC0415

    ctx = open_context(home)
    try:
        job_id = submit_command_job(ctx, tmp_path, "echo hello")
        run_trials(ctx, 1)
        [trial] = list_trials(ctx, job_id)
    finally:
        ctx.close()
    verb, *flags = command
    target = ("--job", job_id) if verb == "list" else (trial.id,)
    code, modules = el_modules(home, "trial", verb, *target, *flags)
    assert code == 0
    assert (
        loaded(modules, ("sqlalchemy", "alembic", "envloop.store.db", "envloop.store.tables", "fastapi"))
        == []
    )
