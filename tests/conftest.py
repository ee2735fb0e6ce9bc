"""Shared fixtures: a private ENVLOOP_HOME per test, and helpers to run the real `el` command."""

import asyncio
import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from sqlalchemy import Engine, event

from envloop import liveness
from envloop.services.context import Context, open_context
from tests import pg
from tests.ports import refusing_port
from tests.preloaded_el import Preloaded

if TYPE_CHECKING:
    from envloop.wire.jobs import JobRequest

REPO = Path(__file__).resolve().parents[1]
pytest_plugins = ["tests.api_server"]  # the `server` and `busy_server` fixtures (a real `el serve`)
EXAMPLES = REPO / "examples"
LONG_TEST_SEC = 300
"""Every test's timeout (pyproject.toml); a test that declares more is one of the suite's longest."""
PRELOADED = Preloaded({k: v for k, v in os.environ.items() if not k.startswith("ENVLOOP_")})
"""The process every `el` call of this test process is forked from (tests/preloaded_el.py)."""
SHARED = REPO.parent / "shared"
"""The workplace's shared test data and Harbor's example tasks, beside the checkout."""


def pytest_configure(config: pytest.Config) -> None:
    """Each pytest-xdist worker is a host of its own to the Docker orphan sweep: a worker that one
    process's test starts sweeps only that process's containers, never those of a worker another
    process's test killed on purpose to watch its containers wait for the sweep."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        os.environ[liveness.HOST_VARIABLE] = f"{socket.gethostname()}-{worker}"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that uses a module-scoped fixture (a server with its jobs, a model, a browser, a
    cluster) runs on the xdist worker of the module's other such tests (`--dist loadgroup`), so the
    fixture is set up once rather than once per worker. A test's own `xdist_group` wins."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None or item.get_closest_marker("xdist_group") is not None:
            continue
        if any(d.scope == "module" for defs in info.name2fixturedefs.values() for d in defs):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    # The tests that declare a long timeout (a model reading Claude Code's prompt, the benchmarks)
    # are handed out first: started late, one of them runs on alone at the end, on one core of two.
    items.sort(key=lambda item: -_long_timeout(item))


def _long_timeout(item: pytest.Item) -> float:
    """The timeout a test declares when it is beyond every test's own, else 0 (longest first)."""
    marker = item.get_closest_marker("timeout")
    seconds = None if marker is None else (marker.args[0] if marker.args else marker.kwargs.get("timeout"))
    return float(seconds) if isinstance(seconds, int | float) and seconds > LONG_TEST_SEC else 0.0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """In CI nothing may be skipped silently: a skip there (no bwrap, no cgroup, …) is a failure."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if os.environ.get("CI") and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, which must run every suite: {report.longrepr}"


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A loopback port that refuses connections for the whole test (`ports.refusing_port`)."""
    with refusing_port() as port:
        yield port


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "home"
    monkeypatch.setenv("ENVLOOP_HOME", str(path))
    monkeypatch.delenv("ENVLOOP_DATABASE_URL", raising=False)
    monkeypatch.delenv("ENVLOOP_ARTIFACTS", raising=False)
    return path


@pytest.fixture(scope="session")
def postgres_databases() -> Iterator[pg.Databases]:
    with pg.server() as url:
        databases = pg.Databases(url)
        yield databases
        databases.close()


@pytest.fixture
def store_url(request: pytest.FixtureRequest, home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """SQLite under the test's home, or (parametrized with "postgresql") a fresh PostgreSQL database,
    exported as ENVLOOP_DATABASE_URL so subprocesses (workers, `el`, servers) use it too."""
    if getattr(request, "param", "sqlite") == "sqlite":
        home.mkdir(parents=True, exist_ok=True)
        yield f"sqlite:///{home / 'envloop.db'}"
        return
    databases: pg.Databases = request.getfixturevalue("postgres_databases")
    with databases.fresh() as url:
        monkeypatch.setenv("ENVLOOP_DATABASE_URL", url)
        yield url


@pytest.fixture
def ctx(home: Path, store_url: str) -> Iterator[Context]:
    context = open_context(home)
    yield context
    context.close()


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


@dataclass
class El:
    """Runs the real `el` entry point in a process of its own against one ENVLOOP_HOME."""

    home: Path
    cwd: Path

    def __call__(self, *args: str, timeout: float = 120, env: dict[str, str] | None = None) -> Result:
        full_env = self._environment(env)
        if PRELOADED.runs(full_env):
            return Result(*PRELOADED.run(args, full_env, self.cwd, timeout))
        return self.fresh(*args, timeout=timeout, env=env)

    def fresh(self, *args: str, timeout: float = 120, env: dict[str, str] | None = None) -> Result:
        """The call in an interpreter started for it, as a user's shell runs `el`."""
        proc = subprocess.run(
            [sys.executable, "-m", "envloop", *args],
            capture_output=True,
            check=False,
            text=True,
            timeout=timeout,
            cwd=self.cwd,
            env=self._environment(env),
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def _environment(self, env: dict[str, str] | None) -> dict[str, str]:
        return {**os.environ, "ENVLOOP_HOME": str(self.home), **(env or {})}

    def ok(self, *args: str, timeout: float = 120) -> Result:
        result = self(*args, timeout=timeout)
        assert result.code == 0, f"el {' '.join(args)} exited {result.code}: {result.stderr}"
        return result


@pytest.fixture
def el(home: Path, tmp_path: Path) -> Iterator[El]:
    runner = El(home=home, cwd=tmp_path)
    yield runner
    stop_background_worker(home)


@pytest.fixture(scope="session")
def cli_el(tmp_path_factory: pytest.TempPathFactory) -> Iterator[El]:
    """The agent CLI tests' one `el` home for the whole run (tests/agent_cli_support.py)."""
    from tests.agent_cli_support import open_cli_home  # noqa: PLC0415 - it imports this module

    runner = open_cli_home(tmp_path_factory.mktemp("agent-clis"))
    yield runner
    stop_background_worker(runner.home)


@contextlib.contextmanager
def statements_run(engine: Engine) -> Iterator[list[tuple[float, str, Any]]]:
    """Each statement `engine` runs inside the block, as it starts: the moment, its SQL and its
    parameters (another engine's, such as a second context's, are not seen)."""
    seen: list[tuple[float, str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_rest: Any) -> None:
        seen.append((time.monotonic(), statement, parameters))

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def processes_where(matches: Callable[[list[bytes], list[bytes]], bool]) -> list[int]:
    """Live processes whose command line and environment (each as its NUL-separated entries)
    `matches` accepts; one that ends or cannot be read meanwhile is left out."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if matches(argv, environ):
            found.append(int(entry.name))
    return found


def process_alive(pid: int) -> bool:
    """Whether the process runs: it exists and has not ended (a zombie, dead but not yet reaped by
    its parent, has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def trial_processes(trial_ids: set[str]) -> list[int]:
    """Processes whose environment marks them as belonging to one of these trials."""
    marks = {f"ENVLOOP_TRIAL_ID={trial_id}".encode() for trial_id in trial_ids}
    return processes_where(lambda _, environ: not marks.isdisjoint(environ))


def stop_process(proc: "subprocess.Popen[Any]", grace: float = 60) -> None:
    """SIGTERM, and SIGKILL if it has not exited within `grace` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def stop_background_worker(home: Path) -> None:
    """Background workers exit on their own when idle; tests end them at once."""
    lock = home / "background-worker.lock"
    if not lock.exists():
        return
    with lock.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pass
        else:
            return  # nobody holds it: no worker to stop
    text = lock.read_text().strip()
    if text.isdigit():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(text), signal.SIGTERM)


def write_profile(path: Path, params: dict[str, str], secret: list[str] | None = None) -> Path:
    path.write_text(
        json.dumps(
            {
                "schema_version": "envplatform.profile/v2",
                "secret_params": secret or [],
                "spec": {"params": params},
            }
        )
    )
    return path


def captured(path: Path) -> str:
    """A command's kept stream as text: a stream that printed nothing kept no file, and reads as ""."""
    return path.read_text() if path.exists() else ""


def make_task(root: Path, name: str, solve: str = "", test: str | None = None, toml: str = "") -> Path:
    """A small Harbor-format task written for both sandbox modes."""
    task = root / name
    (task / "tests").mkdir(parents=True)
    (task / "solution").mkdir()
    (task / "environment").mkdir()
    (task / "task.toml").write_text('version = "1.0"\n' + toml)
    (task / "instruction.md").write_text(f"Do the {name} thing.\n")
    (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
    (task / "solution" / "solve.sh").write_text("#!/usr/bin/env bash\n" + solve + "\n")
    default_test = (
        'logs="${ENVLOOP_LOGS_DIR:-/logs}"; app="${ENVLOOP_APP_DIR:-/app}"\n'
        'if [ -f "$app/done" ]; then echo 1 > "$logs/verifier/reward.txt"; '
        'else echo 0 > "$logs/verifier/reward.txt"; fi\n'
    )
    (task / "tests" / "test.sh").write_text(
        "#!/usr/bin/env bash\n" + (test if test is not None else default_test)
    )
    return task


def wait_for(condition: Callable[[], bool], timeout: float = 60) -> None:
    """Wait until `condition()` holds; fail the test if it has not within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def run_trials(ctx: Context, count: int, capacity: int = 4) -> None:
    """Run `count` trials of the queue to their end on a worker in this process: set-up that needs
    finished trials, without an `el` start and a background worker. The worker's event loop runs
    on a thread of its own, since the caller's may already run one (Playwright's sync API does)."""
    from envloop.scheduling.worker import Worker, WorkerConfig  # noqa: PLC0415 - only the tests that run trials

    worker = Worker(ctx, WorkerConfig(capacity=capacity, idle_poll=0.01))
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, worker.run(until=lambda: worker.completed >= count)).result()


def run_job_in_process(ctx: Context, request: "JobRequest") -> str:
    """Submit the job and run all its trials to their end in this process (`run_trials`); its id."""
    from envloop.services import job_submission  # noqa: PLC0415 - only the tests that submit

    job = job_submission.submit_job(ctx, request).job
    run_trials(ctx, sum(job.counts.values()))
    return job.id


def publish_profile(ctx: Context, path: Path, name: str, params: dict[str, str]) -> str:
    """Write the profile file at `path` and create profile `name` version 1 from it; its ref."""
    from envloop.services import profiles  # noqa: PLC0415 - only the tests that submit

    return profiles.create_profile(
        ctx, name, "1", profiles.read_profile_file(write_profile(path, params))
    ).ref


def submit_command_job(ctx: Context, tmp_path: Path, command: str, tasks: int = 1, attempts: int = 1) -> str:
    """Push `tasks` small tasks as dataset `ds`, publish profile `cmd@1` (the command agent running
    `command`) and submit the job; its id."""
    from envloop.services import datasets, job_submission, profiles  # noqa: PLC0415 - only the tests that submit

    src = tmp_path / "src"
    for number in range(tasks):
        make_task(src, f"t{number}")
    ref = datasets.push_dataset(ctx, src, "ds").ref
    document = profiles.read_profile_file(
        write_profile(tmp_path / "p.json", {"AGENT_NAME": "command", "AGENT_COMMAND": command})
    )
    profiles.create_profile(ctx, "cmd", "1", document)
    return job_submission.submit_job(
        ctx, job_submission.JobRequest(dataset=ref, profiles=["cmd@1"], attempts=attempts)
    ).job.id


def submit_nop_job(ctx: Context, tmp_path: Path, tasks: int = 3, attempts: int = 2, **extra: object) -> str:
    """A job of `tasks` fresh tasks, `attempts` each, for the `nop` agent, submitted through the service
    layer and left pending for a test to claim and settle by hand."""
    from envloop.services import datasets, job_submission, profiles  # noqa: PLC0415

    src = tmp_path / f"src{time.monotonic_ns()}"
    for i in range(tasks):
        make_task(src, f"t{i}", solve="touch done")
    ref = datasets.push_dataset(ctx, src, f"ds{time.monotonic_ns()}").ref
    doc = profiles.read_profile_file(write_profile(tmp_path / "p.json", {"AGENT_NAME": "nop"}))
    profiles.create_profile(ctx, "p", "1", doc)
    request = job_submission.JobRequest(dataset=ref, profiles=["p@1"], attempts=attempts, **extra)  # type: ignore[arg-type]
    return job_submission.submit_job(ctx, request).job.id
