"""Real jobs for the console tests: the seed example on `envloop/shell@1` and an agent job against the
scripted model endpoint, each with hostile text (HTML and script) where tasks, agents and verifiers
can put it.

The seed example (two attempts per task): A [1, 0], B [1, 1], C [0, missing] gives score 60%,
5/6 attempts scored and 2/3 members complete. C's second attempt writes a reward file that is not a
number, so it finishes without a reward and its note quotes the file: a `<script>`.
"""

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from envloop.core.status import TERMINAL
from envloop.services import datasets, job_submission, jobs, trials
from envloop.services.context import Context, open_context
from envloop.testing import Reply, ScriptedServer, ScriptedToolCall
from envloop.wire.jobs import JobRequest
from tests.api_server import Server, start_server
from tests.conftest import El, make_task, publish_profile, run_job_in_process, wait_for, write_profile

HOSTILE = "<script>window.__pwned=1</script>"
HOSTILE_OUTPUT = '<img src=x onerror="window.__pwned=2">'
HOSTILE_TAG = "<b>bold</b>"

_REWARD_BY_ATTEMPT = """logs="${{ENVLOOP_LOGS_DIR:-/logs}}"; app="${{ENVLOOP_APP_DIR:-/app}}"
attempt="$(cat "$app/attempt" 2>/dev/null || echo 0)"
case "$attempt" in
{cases}
esac
"""


def _verifier(rewards: dict[int, str], extra: str = "") -> str:
    cases = "\n".join(
        f'  {n}) printf %s {value!r} > "$logs/verifier/reward.txt" ;;' for n, value in rewards.items()
    )
    return _REWARD_BY_ATTEMPT.format(cases=cases) + extra


STRUCTURED = {
    "verifier_version": "2",
    "composite": 0.8,
    "dimensions": {"correctness": {"value": 0.9, "scale": [0, 1], "direction": "higher"}},
    "judges": [{"name": "style", "model": "judge-1", "score": 4, "summary": HOSTILE}],
}
_STRUCTURED = f"cat > \"$logs/verifier/result.json\" <<'JSON'\n{json.dumps(STRUCTURED)}\nJSON\n"


def _metadata(category: str, *tags: str) -> str:
    return f'[metadata]\ncategory = "{category}"\ntags = {json.dumps(list(tags))}\n'


def seed_tasks(root: Path) -> Path:
    make_task(root, "A", test=_verifier({1: "1", 2: "0"}), toml=_metadata("files", "easy"))
    make_task(
        root, "B", test=_verifier({1: "1", 2: "1"}, _STRUCTURED), toml=_metadata("files", "easy", "json")
    )
    make_task(root, "C", test=_verifier({1: "0", 2: HOSTILE}), toml=_metadata(HOSTILE, "hard"))
    return root


@dataclass(frozen=True)
class Jobs:
    seed: str
    agent: str
    agent_trial: str


def make_seed_job(ctx: Context, root: Path) -> str:
    dataset = datasets.push_dataset(ctx, seed_tasks(root / "seed-tasks"), "seed").ref
    command = (
        'echo "$ENVLOOP_ATTEMPT" > "${ENVLOOP_APP_DIR:-/app}/attempt"; '
        f"echo {json.dumps(HOSTILE_OUTPUT)}; echo attempt $ENVLOOP_ATTEMPT of $ENVLOOP_TASK"
    )
    params = {"AGENT_NAME": "command", "AGENT_COMMAND": command}
    profile = publish_profile(ctx, root / "seed-profile.json", "team/shell", params)
    request = JobRequest(dataset=dataset, profiles=[profile], attempts=2, tags={"note": HOSTILE_TAG})
    return run_job_in_process(ctx, request)


def bash(command: str) -> Reply:
    return Reply(tool_calls=[ScriptedToolCall(name="bash", arguments={"command": command})])


AGENT_SCRIPT = [
    bash(f"printf 'hello\\n' > notes.txt && echo {json.dumps(HOSTILE)}"),
    bash("echo more >> notes.txt && cat notes.txt"),
    bash("seq 1 30000"),
    bash("rm notes.txt && touch done"),
    Reply(tool_calls=[ScriptedToolCall(name="finish", arguments={"summary": "created and removed notes"})]),
]


def make_agent_job(ctx: Context, root: Path) -> tuple[str, str]:
    make_task(root / "agent-tasks", "hello", solve="touch done")
    dataset = datasets.push_dataset(ctx, root / "agent-tasks", "agentic").ref
    with ScriptedServer(AGENT_SCRIPT) as server:
        params = {
            "AGENT_NAME": "envloop",
            "MODEL_PROTOCOL": "openai",
            "MODEL_BASE_URL": server.openai_url,
            "MODEL_NAME": "team-model/sft",
            "MAX_RETRIES": "0",
        }
        profile = publish_profile(ctx, root / "agent-profile.json", "team/agent", params)
        job = run_job_in_process(ctx, JobRequest(dataset=dataset, profiles=[profile]))
    [trial] = trials.list_trials(ctx, job)
    return job, trial.id


@contextmanager
def console_server(root: Path) -> Iterator[tuple[Server, Jobs]]:
    """`el serve` with one worker on a store holding the seed job and the agent job (finished), both
    set up through the services and run on a worker in this process: the tests read them, they do
    not test how they were made."""
    el = El(home=root / "home", cwd=root)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ENVLOOP_HOME", str(el.home))  # the home the services default to, as in `el`
        ctx = open_context(el.home)
        try:
            seed = make_seed_job(ctx, root)
            agent, agent_trial = make_agent_job(ctx, root)
        finally:
            ctx.close()
    server = start_server(el, root / "serve.log", "--workers", "1", "--capacity", "4")
    try:
        yield server, Jobs(seed=seed, agent=agent, agent_trial=agent_trial)
    finally:
        server.stop()


def run_on_server(
    server: Server, path: Path, new_profile: tuple[str, dict[str, str]], request: JobRequest
) -> str:
    """Create the profile (name, params) and submit the job through the services on the server's
    store, then wait until the server's worker has run it to its end: the tests read what the
    console shows of it, they do not test `el job submit`."""
    name, params = new_profile
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ENVLOOP_HOME", str(server.el.home))  # the home the services default to
        ctx = open_context(server.el.home)
        try:
            publish_profile(ctx, path, name, params)
            job = job_submission.submit_job(ctx, request).job.id
            wait_for(lambda: jobs.job_progress(ctx, job).status in TERMINAL, timeout=300)
        finally:
            ctx.close()
    return job


def trials_of(server: Server, job_id: str) -> dict[tuple[str, int], dict[str, Any]]:
    """The job's trials by (task, attempt), as the API gives them."""
    with server.http() as http:
        listed = http.get(f"/v1/jobs/{job_id}/trials").json()
    return {(t["task"], t["attempt"]): t for t in listed}


def twin_job(server: Server, root: Path) -> str:
    """A second run of the seed dataset whose agent always writes attempt 2: against the seed job,
    task A regresses from 50% to 0%, B stays at 100%, C is scored only by the seed job."""
    command = 'echo 2 > "${ENVLOOP_APP_DIR:-/app}/attempt"'
    profile = write_profile(root / "twin.json", {"AGENT_NAME": "command", "AGENT_COMMAND": command})
    server.el.ok("profile", "create", "team/twin", "1", "--file", str(profile))
    submitted = server.el(
        *("job", "submit", "--dataset", "seed@1", "--profile", "team/twin@1", "--attempts", "2"),
        *("--name", "twin run", "--wait", "--json"),
        timeout=300,
    )
    assert submitted.code in (0, 3), submitted.stderr
    return str(submitted.json()["id"])
