"""What importing the client-facing modules loads, measured in a fresh interpreter.

Code that only talks to envloop (the HTTP client, the wire models, a notebook's `import envloop`)
must not pay for the store, the sandbox or the model SDKs: each of them costs tenths of a second
to import and none is needed to send a request or read an answer.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
HEAVY = ("sqlalchemy", "envloop.store", "envloop.environments", "openai", "anthropic", "fastapi")


def loaded_after(statement: str) -> set[str]:
    """The modules a fresh interpreter holds after running `statement`."""
    probe = f"{statement}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", probe], capture_output=True, text=True, env=env, check=True
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


def heavy_in(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


@pytest.mark.parametrize(
    "statement",
    [
        "import envloop.client",
        "import envloop.wire",
        "import envloop",
        "from envloop import Client",
        "from envloop.client import Client; Client('http://127.0.0.1:9')",
    ],
)
def test_client_side_imports_load_no_store_sandbox_sdk_or_web_framework(statement: str) -> None:
    assert heavy_in(loaded_after(statement)) == []


def test_the_probe_does_see_heavy_modules_when_they_are_loaded() -> None:
    """The check above would pass vacuously if the probe could not see a loaded module."""
    assert "sqlalchemy" in heavy_in(loaded_after("import envloop.services.jobs"))


def test_wire_models_are_the_ones_the_services_return() -> None:
    """One class per model: the service modules re-export the wire models instead of copying them."""
    from envloop.services import jobs, results, trials  # noqa: PLC0415
    from envloop.wire import JobResult, JobView, TrialView  # noqa: PLC0415

    assert jobs.JobView is JobView
    assert results.JobResult is JobResult
    assert trials.TrialView is TrialView


@pytest.mark.parametrize(
    ("statement", "unused"),
    [
        # `el profile create`, `el dataset push`, `el job submit`, every worker process:
        ("import envloop.runners.params", ("openai", "anthropic", "aiohttp")),
        ("import envloop.scheduling.worker", ("openai", "anthropic", "aiohttp")),
        ("import envloop.api", ("openai", "anthropic")),  # `el serve`
        ("import envloop.gateway", ("openai", "anthropic")),  # a worker's first model route
        # A trial of an agent that could call a model (`command`), whose profile names none:
        (
            "import asyncio\nfrom pathlib import Path\nfrom envloop.core.trial import TrialSpec\n"
            "from envloop.runners.model_route import open_route\n"
            "spec = TrialSpec(job_id='j', trial_id='t', task_name='x', attempt=1, profile_ref='p@1',"
            " runner='envloop/shell@1', params={'AGENT_NAME': 'command'}, task_dir=Path('.'),"
            " instance_root=Path('.'), artifacts_dir=Path('.'))\n"
            "assert asyncio.run(open_route(None, spec, None, 'openai')) is None",
            ("openai", "anthropic", "aiohttp", "envloop.gateway"),
        ),
    ],
)
def test_jobs_workers_and_the_gateway_load_what_a_model_needs_only_when_a_model_is_called(
    statement: str, unused: tuple[str, ...]
) -> None:
    """The `openai` and `anthropic` SDKs take more than two seconds of CPU to import, together, and
    the gateway's aiohttp a quarter of one; a job of shell tasks never routes a model, and a
    gateway reading what it forwards never builds an SDK client."""
    modules = loaded_after(statement)
    assert sorted(m for m in modules if any(m == name or m.startswith(f"{name}.") for name in unused)) == []


def test_the_sdk_is_loaded_by_the_first_model_client() -> None:
    build = (
        "import asyncio\nfrom envloop.models import model_client, model_settings\n"
        "settings = model_settings({'MODEL_PROTOCOL': 'anthropic', 'MODEL_BASE_URL': 'http://127.0.0.1:9',"
        " 'MODEL_NAME': 'm'})\n"
        "async def main():\n    model_client(settings)\nasyncio.run(main())"
    )
    assert "anthropic" in loaded_after(build)


def test_an_embedded_store_imports_sqlalchemys_sqlite_dialect_alone(tmp_path: Path) -> None:
    """PostgreSQL's dialect costs every worker and write command 50 ms of CPU; it loads with a
    PostgreSQL store (and with the migrations of a store made by an earlier release)."""
    from envloop.services.context import open_context  # noqa: PLC0415 - only to create the home

    open_context(tmp_path).close()
    opened = (
        f"from pathlib import Path\nfrom envloop.services.context import open_context\n"
        f"open_context(Path({str(tmp_path)!r})).close()\nimport envloop.scheduling.worker"
    )
    modules = loaded_after(opened)
    assert "sqlalchemy.dialects.sqlite" in modules
    assert "sqlalchemy.dialects.postgresql" not in modules
