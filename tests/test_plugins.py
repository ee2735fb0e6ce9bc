"""Plugins as users install them: the example plugin package (examples/plugins) is built into a
wheel, installed into a directory of its own (never into envloop's environment), and real `el`
processes with that directory on their path list it, show its typed params, and run jobs with its
agent and its scorer. Broken plugins are reported in one line and break nothing else; a worker
without the plugin fails the trial as an infrastructure error, never with a reward."""

import fcntl
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from envloop.testing import Received, Reply, ScriptedServer
from tests.conftest import EXAMPLES, REPO, El, Result, write_profile

PLUGIN_SOURCE = EXAMPLES / "plugins" / "envloop-example-plugin"
PLUGIN = "envloop-example-plugin"


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example plugin, built and installed the way an operator would, into a directory of its own."""
    root = tmp_path_factory.mktemp("plugin")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(root / "wheels"), str(PLUGIN_SOURCE)],
        check=True,
        capture_output=True,
    )
    [wheel] = (root / "wheels").glob("*.whl")
    site = root / "site"
    subprocess.run(
        [*pip, "install", "--no-deps", "--no-index", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
    )
    return site


def with_path(el: El, *dirs: Path) -> El:
    """`el` whose Python path holds `dirs` before envloop's source."""
    path = os.pathsep.join([*(str(d) for d in dirs), str(REPO / "src")])

    class Pathed(El):
        def __call__(self, *args: str, timeout: float = 120, env: dict[str, str] | None = None) -> Result:
            return super().__call__(*args, timeout=timeout, env={"PYTHONPATH": path, **(env or {})})

    return Pathed(home=el.home, cwd=el.cwd)


@pytest.fixture
def pel(el: El, plugin_site: Path) -> El:
    return with_path(el, plugin_site)


def profile(
    el: El, tmp_path: Path, name: str, params: dict[str, str], secret: list[str] | None = None
) -> str:
    path = write_profile(tmp_path / f"{name.replace('/', '-')}.json", params, secret=secret)
    el.ok("profile", "create", name, "1", "--file", str(path))
    return f"{name}@1"


def test_the_plugins_agent_and_scorer_are_listed_with_where_they_came_from(pel: El) -> None:
    listed = pel.ok("plugin", "list", "--json").json()
    assert listed["problems"] == []
    origins = {(c["kind"], c["name"]): c["origin"] for c in listed["components"]}
    for key, entry_point in [
        (("agent", "greeter"), "envloop_example_plugin.agents:GreeterAgent"),
        (("scorer", "keywords"), "envloop_example_plugin.scorers:score_keywords"),
    ]:
        assert origins[key] == {
            "source": "plugin",
            "distribution": PLUGIN,
            "version": "0.1.0",
            "entry_point": entry_point,
        }
    assert origins[("agent", "oracle")]["source"] == "built-in"
    agents = pel.ok("agent", "list").stdout
    assert "greeter" in agents and f"{PLUGIN} 0.1.0" in agents


def test_runner_show_gives_a_json_schema_per_agent_including_the_plugins(pel: El) -> None:
    shown = pel.ok("runner", "show", "envloop/shell@1", "--json").json()
    schemas = {agent["name"]: agent["params_schema"] for agent in shown["agents"]}
    assert {"oracle", "envloop", "greeter"} <= set(schemas)
    repeat = schemas["greeter"]["properties"]["REPEAT"]
    assert (repeat["type"], repeat["minimum"], repeat["maximum"], repeat["default"]) == ("integer", 1, 100, 1)
    assert schemas["envloop"]["properties"]["MODEL_API_KEY"]["secret"] is True
    assert shown["params_schema"]["required"] == ["AGENT_NAME"]


@pytest.mark.slow
def test_a_job_runs_with_the_plugins_agent_and_its_params_are_typed(pel: El, tmp_path: Path) -> None:
    pel.ok("dataset", "push", str(EXAMPLES / "tasks"), "--name", "demo")
    greeter = profile(pel, tmp_path, "team/greeter", {"AGENT_NAME": "greeter", "REPEAT": "1"})
    job = pel.ok(
        "job", "submit", "--dataset", "demo@1", "--profile", greeter, "--task", "hello-file",
        "--wait", "--json", timeout=300,
    ).json()  # fmt: skip
    assert job["status"] == "completed"
    [trial] = pel.ok("trial", "list", "--job", job["id"], "--json").json()
    assert (trial["status"], trial["reward"]) == ("completed", 1.0)

    # A module:Name reference into an installed plugin needs no allowlist: the operator installed it.
    reference = "envloop_example_plugin.agents:GreeterAgent"
    by_reference = profile(pel, tmp_path, "team/greeter-ref", {"AGENT_NAME": reference})
    job = pel.ok(
        "job", "submit", "--dataset", "demo@1", "--profile", by_reference, "--task", "hello-file",
        "--wait", "--json", timeout=300,
    ).json()  # fmt: skip
    [trial] = pel.ok("trial", "list", "--job", job["id"], "--json").json()
    assert trial["reward"] == 1.0

    # Twice the line is not what the task asks: the agent really ran with the profile's value.
    twice = profile(pel, tmp_path, "team/greeter-twice", {"AGENT_NAME": "greeter", "REPEAT": "2"})
    job = pel.ok(
        "job", "submit", "--dataset", "demo@1", "--profile", twice, "--task", "hello-file",
        "--wait", "--json", timeout=300,
    ).json()  # fmt: skip
    [trial] = pel.ok("trial", "list", "--job", job["id"], "--json").json()
    assert trial["reward"] == 0.0

    mistyped = write_profile(tmp_path / "mistyped.json", {"AGENT_NAME": "greeter", "REPEAT": "lots"})
    refused = pel("profile", "create", "team/greeter-bad", "1", "--file", str(mistyped))
    assert (refused.code, refused.stderr) == (
        2,
        "el: error: profile team/greeter-bad@1: REPEAT must be a whole number from 1 to 100, not 'lots'\n",
    )

    extra = profile(pel, tmp_path, "team/greeter-extra", {"AGENT_NAME": "greeter", "MODEL_NAME": "m"})
    warned = pel.ok("job", "submit", "--dataset", "demo@1", "--profile", extra, "--task", "hello-file")
    assert f"profile {extra}: agent 'greeter' does not read MODEL_NAME (no effect)" in warned.stderr


ROWS = [
    {"id": "paris", "prompt": "Where is the Eiffel Tower?", "answer": "Paris, France"},
    {"id": "rome", "prompt": "Where is the Colosseum?", "answer": "Rome Italy"},
]


def answers(received: Received) -> Reply:
    return Reply(text={"Where is the Eiffel Tower?": "It is in Paris."}.get(received.prompt, "In Italy."))


@pytest.fixture
def endpoint() -> Iterator[ScriptedServer]:
    with ScriptedServer(default=answers) as server:
        yield server


def chat_params(server: ScriptedServer) -> dict[str, str]:
    return {"MODEL_PROTOCOL": "openai", "MODEL_BASE_URL": server.openai_url, "MODEL_NAME": "m"}


@pytest.mark.slow
def test_a_chat_job_is_scored_by_the_plugins_scorer(
    pel: El, tmp_path: Path, endpoint: ScriptedServer
) -> None:
    rows = tmp_path / "places.jsonl"
    rows.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    pushed = pel.ok("dataset", "push", str(rows), "--name", "places", "--scorer", "keywords", "--json").json()
    assert pushed["scorer"] == "keywords"
    chat = profile(pel, tmp_path, "team/chat", chat_params(endpoint))
    job = pel.ok(
        "job", "submit", "--dataset", pushed["ref"], "--profile", chat, "--wait", "--json", timeout=300
    ).json()  # fmt: skip
    assert job["status"] == "completed"
    rewards = {t["task"]: t["reward"] for t in pel.ok("trial", "list", "--job", job["id"], "--json").json()}
    assert rewards == {"paris": 0.5, "rome": 0.5}
    [paris] = [
        t for t in pel.ok("trial", "list", "--job", job["id"], "--json").json() if t["task"] == "paris"
    ]
    steps = pel.ok("trial", "get", paris["id"], "--steps").stdout
    assert "keywords" in steps and "1 of 2 expected words found (missing: france)" in steps


@pytest.mark.slow
def test_a_worker_without_the_plugin_fails_its_trials_without_a_reward(
    el: El, pel: El, tmp_path: Path, endpoint: ScriptedServer
) -> None:
    pel.ok("dataset", "push", str(EXAMPLES / "tasks"), "--name", "demo")
    rows = tmp_path / "places.jsonl"
    rows.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    pel.ok("dataset", "push", str(rows), "--name", "places", "--scorer", "keywords")
    greeter = profile(pel, tmp_path, "team/greeter", {"AGENT_NAME": "greeter"})
    chat = profile(pel, tmp_path, "team/chat", chat_params(endpoint))
    # A worker of this home without the plugin is the one that runs the trials.
    bare = subprocess.Popen(
        [sys.executable, "-m", "envloop", "worker", "--background", "--idle-exit", "120"],
        env={**os.environ, "ENVLOOP_HOME": str(el.home), "PYTHONPATH": str(REPO / "src")},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not _held(el.home / "background-worker.lock"):
            assert time.monotonic() < deadline, "the plugin-less worker did not start"
            time.sleep(0.1)
        for dataset, chosen, task in [("demo@1", greeter, "hello-file"), ("places@1", chat, "paris")]:
            submit = ("job", "submit", "--dataset", dataset, "--profile", chosen, "--task", task)
            failed = pel(*submit, "--wait", "--json", timeout=300)
            assert failed.code == 3  # the job ended failed
            job = failed.json()
            [trial] = pel.ok("trial", "list", "--job", job["id"], "--json").json()
            assert trial["status"] == "failed" and trial["reward"] is None
            assert trial["error_type"] == "infrastructure_error"
            assert "on this worker (install the plugin on every worker" in trial["error_message"]
        assert endpoint.received == []  # the model is never asked for an answer no one can score
    finally:
        bare.terminate()
        bare.wait(timeout=30)


def _held(lock: Path) -> bool:
    """Whether some process holds the background worker's lock."""
    if not lock.exists():
        return False
    with lock.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def broken_site(root: Path) -> Path:
    """An installed distribution whose entry points fail every way a plugin can."""
    site = root / "broken-site"
    dist = site / "broken_plugin-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[envloop.agents]\n"
        "crashing = broken_plugin_mod:Agent\n"
        "oracle = broken_plugin_mod:Agent\n"
        "shapeless = json:dumps\n"
        "[envloop.scorers]\n"
        "exact = broken_plugin_mod:score\n"
    )
    (site / "broken_plugin_mod.py").write_text('raise RuntimeError("boom\\non two lines")\n')
    return site


@pytest.mark.slow
def test_broken_plugins_are_reported_in_one_line_each_and_break_nothing_else(el: El, tmp_path: Path) -> None:
    bel = with_path(el, broken_site(tmp_path))
    listed = bel("plugin", "list")
    assert listed.code == 0
    warnings = [line for line in listed.stderr.splitlines() if line.startswith("warning:")]
    where = "plugin broken-plugin 0.1: entry point"
    assert warnings == [
        f"warning: {where} envloop.agents:crashing (broken_plugin_mod:Agent) failed to load: "
        "RuntimeError: boom on two lines",
        f"warning: {where} envloop.agents:oracle (broken_plugin_mod:Agent) takes the name of the built-in "
        "agent; ignored",
        f"warning: {where} envloop.agents:shapeless (json:dumps) is not an agent: "
        "it has no info = AgentInfo(...)",
        f"warning: {where} envloop.scorers:exact (broken_plugin_mod:score) takes the name of the built-in "
        "scorer; ignored",
    ]
    assert "Traceback" not in listed.stderr
    assert bel.ok("runner", "list").stdout.count("built-in") == 2

    bel.ok("dataset", "push", str(EXAMPLES / "tasks"), "--name", "demo")
    oracle = profile(bel, tmp_path, "team/oracle", {"AGENT_NAME": "oracle"})
    submit = ("job", "submit", "--dataset", "demo@1", "--task", "hello-file")
    job = bel.ok(*submit, "--profile", oracle, "--wait", "--json", timeout=300).json()
    assert job["status"] == "completed"  # the built-in oracle, not the plugin that wanted its name
    crashing = write_profile(tmp_path / "crashing.json", {"AGENT_NAME": "crashing"})
    refused = bel("profile", "create", "team/crashing", "1", "--file", str(crashing))
    assert refused.code == 2 and refused.stderr.count("\n") == 1
    assert "agents:crashing (broken_plugin_mod:Agent) failed to load: RuntimeError: boom" in refused.stderr


def runner_and_environment_site(root: Path) -> Path:
    """An installed distribution that adds a runner and an environment provider."""
    site = root / "extra-site"
    dist = site / "acme_extras-2.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-extras\nVersion: 2.0\n")
    (dist / "entry_points.txt").write_text(
        "[envloop.runners]\nacme/shell@1 = acme_extras:Runner\n"
        "[envloop.environments]\nquiet = acme_extras:Quiet\n"
    )
    (site / "acme_extras.py").write_text(
        "from envloop.environments.local import LocalEnvironmentProvider\n"
        "from envloop.runners.shell import ShellRunner\n\n\n"
        "class Runner(ShellRunner):\n"
        '    ref = "acme/shell@1"\n'
        '    description = "the shell runner under another name"\n\n\n'
        "class Quiet(LocalEnvironmentProvider):\n"
        '    """The local sandbox, provided by a plugin."""\n'
    )
    return site


@pytest.mark.slow
def test_a_runner_and_an_environment_from_a_plugin_run_a_job(el: El, tmp_path: Path) -> None:
    xel = with_path(el, runner_and_environment_site(tmp_path))
    runners = {r["ref"]: r["origin"] for r in xel.ok("runner", "list", "--json").json()}
    assert runners["acme/shell@1"]["distribution"] == "acme-extras"
    pushed = xel.ok(
        "dataset", "push", str(EXAMPLES / "tasks"), "--name", "acme", "--runner", "acme/shell@1", "--json"
    ).json()  # fmt: skip
    assert pushed["runner"] == "acme/shell@1"
    oracle = profile(xel, tmp_path, "team/oracle", {"AGENT_NAME": "oracle"})
    submit = ("job", "submit", "--dataset", "acme@1", "--profile", oracle, "--task", "hello-file")
    job = xel.ok(*submit, "--environment", "quiet", "--wait", "--json", timeout=300).json()
    assert (job["status"], job["runner"], job["environment"]) == ("completed", "acme/shell@1", "quiet")
    refused = xel(*submit, "--environment", "loud")
    assert (refused.code, refused.stderr) == (
        2,
        "el: error: --environment 'loud': expected local, docker, auto or quiet\n",
    )
