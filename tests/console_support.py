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

from envloop.testing import Reply, ScriptedServer, ScriptedToolCall
from tests.api_server import Server, start_server
from tests.conftest import El, make_task, stop_background_worker, write_profile

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


def _submit(el: El, *args: str) -> str:
    result = el("job", "submit", *args, "--json", timeout=300)
    # A followed job that ends failed exits 3: the seed job does, its broken verifier on purpose.
    assert result.code in (0, 3), f"el job submit exited {result.code}: {result.stderr}"
    submitted = result.json()
    return str(submitted["id"] if "id" in submitted else submitted["job"]["id"])


@dataclass(frozen=True)
class Jobs:
    seed: str
    agent: str
    agent_trial: str


def make_seed_job(el: El, root: Path) -> str:
    el.ok("dataset", "push", str(seed_tasks(root / "seed-tasks")), "--name", "seed")
    command = (
        'echo "$ENVLOOP_ATTEMPT" > "${ENVLOOP_APP_DIR:-/app}/attempt"; '
        f"echo {json.dumps(HOSTILE_OUTPUT)}; echo attempt $ENVLOOP_ATTEMPT of $ENVLOOP_TASK"
    )
    profile = write_profile(root / "seed-profile.json", {"AGENT_NAME": "command", "AGENT_COMMAND": command})
    el.ok("profile", "create", "team/shell", "1", "--file", str(profile))
    return _submit(
        el,
        "--dataset",
        "seed@1",
        "--profile",
        "team/shell@1",
        "--attempts",
        "2",
        "--tag",
        f"note={HOSTILE_TAG}",
        "--wait",
    )


def bash(command: str) -> Reply:
    return Reply(tool_calls=[ScriptedToolCall(name="bash", arguments={"command": command})])


AGENT_SCRIPT = [
    bash(f"printf 'hello\\n' > notes.txt && echo {json.dumps(HOSTILE)}"),
    bash("echo more >> notes.txt && cat notes.txt"),
    bash("seq 1 30000"),
    bash("rm notes.txt && touch done"),
    Reply(tool_calls=[ScriptedToolCall(name="finish", arguments={"summary": "created and removed notes"})]),
]


def make_agent_job(el: El, root: Path) -> tuple[str, str]:
    make_task(root / "agent-tasks", "hello", solve="touch done")
    el.ok("dataset", "push", str(root / "agent-tasks"), "--name", "agentic")
    with ScriptedServer(AGENT_SCRIPT) as server:
        params = {
            "AGENT_NAME": "envloop",
            "MODEL_PROTOCOL": "openai",
            "MODEL_BASE_URL": server.openai_url,
            "MODEL_NAME": "team-model/sft",
            "MAX_RETRIES": "0",
        }
        profile = write_profile(root / "agent-profile.json", params)
        el.ok("profile", "create", "team/agent", "1", "--file", str(profile))
        job = _submit(el, "--dataset", "agentic@1", "--profile", "team/agent@1", "--wait")
    [trial] = el.ok("trial", "list", "--job", job, "--json").json()
    return job, str(trial["id"])


@contextmanager
def console_server(root: Path) -> Iterator[tuple[Server, Jobs]]:
    """`el serve` with one worker on a store holding the seed job and the agent job (finished)."""
    el = El(home=root / "home", cwd=root)
    try:
        seed = make_seed_job(el, root)
        agent, agent_trial = make_agent_job(el, root)
        server = start_server(el, root / "serve.log", "--workers", "1", "--capacity", "4")
    finally:
        stop_background_worker(el.home)
    try:
        yield server, Jobs(seed=seed, agent=agent, agent_trial=agent_trial)
    finally:
        server.stop()


def trials_of(server: Server, job_id: str) -> dict[tuple[str, int], dict[str, Any]]:
    """The job's trials by (task, attempt), as the API gives them."""
    with server.http() as http:
        listed = http.get(f"/v1/jobs/{job_id}/trials").json()
    return {(t["task"], t["attempt"]): t for t in listed}
