"""The canary: a secret planted in a profile, a hostile agent and verifier that echo it everywhere
they can (stdout, stderr, files and file names, the reward note, dimension names, result.json,
the trajectory), and then a search for it in every file under ENVLOOP_HOME (the database included),
every API response, every CLI output and the console's pages. It must be found nowhere."""

import secrets
from pathlib import Path

import pytest

from tests.api_server import start_server
from tests.conftest import El, make_task, write_profile

pytestmark = pytest.mark.slow

SECRET = f"canary-{secrets.token_hex(12)}"
TOML = '[environment]\nenv = { AGENT_KEY = "${JUDGE_KEY}" }\n[verifier]\nenv = { JUDGE = "${JUDGE_KEY}" }\n'
VERIFIER_COMMON = (
    'logs="${ENVLOOP_LOGS_DIR:-/logs}/verifier"\n'
    'echo "verifier sees $JUDGE"; echo "verifier warns $JUDGE" >&2\n'
    'mkdir -p "$logs/dir-$JUDGE"; echo "$JUDGE" > "$logs/dir-$JUDGE/file-$JUDGE.txt"\n'
    'printf \'{"dimensions": {"%s": {"value": 1, "scale": [0, 1], "direction": "higher"}},'
    ' "judges": [{"name": "j", "summary": "the key is %s"}]}\' "$JUDGE" "$JUDGE" > "$logs/result.json"\n'
)
VERIFIERS = {
    "note": VERIFIER_COMMON + 'printf "score for %s" "$JUDGE" > "$logs/reward.txt"\n',
    "dimension": VERIFIER_COMMON + 'printf \'{"reward": 1, "%s": 0.5}\' "$JUDGE" > "$logs/reward.json"\n',
}
AGENT = (
    'echo "agent has $AGENT_KEY"; echo "agent warns $AGENT_KEY" >&2; '
    'app="${ENVLOOP_APP_DIR:-/app}"; echo "$AGENT_KEY" > "$app/leak-$AGENT_KEY.txt"; '
    'mkdir -p "${ENVLOOP_LOGS_DIR:-/logs}/agent"; '
    'echo "$AGENT_KEY" > "${ENVLOOP_LOGS_DIR:-/logs}/agent/note-$AGENT_KEY.txt"'
)


def _files_holding(root: Path, needle: bytes) -> list[str]:
    found = []
    for path in sorted(root.rglob("*")):
        if needle.decode() in path.name:
            found.append(f"name: {path}")
        if path.is_file() and not path.is_symlink() and needle in path.read_bytes():
            found.append(f"content: {path}")
    return found


def test_a_planted_secret_appears_nowhere(el: El, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    for name, verifier in VERIFIERS.items():
        make_task(tasks, name, test=verifier, toml=TOML)
    params = {"AGENT_NAME": "command", "AGENT_COMMAND": AGENT, "JUDGE_KEY": SECRET}
    profile = write_profile(tmp_path / "canary.json", params, secret=["JUDGE_KEY"])
    printed: list[str] = []

    def run(*args: str, env: dict[str, str] | None = None, codes: tuple[int, ...] = (0,)) -> str:
        result = el(*args, env=env, timeout=300)
        assert result.code in codes, f"el {' '.join(args)}: {result.stderr}"
        printed.extend([result.stdout, result.stderr])
        return result.stdout

    run("dataset", "push", str(tasks), "--name", "canary")
    run("profile", "create", "team/canary", "1", "--file", str(profile))
    args = (
        "job",
        "submit",
        "--dataset",
        "canary@1",
        "--profile",
        "team/canary@1",
        "--attempts",
        "2",
        "--wait",
    )
    job = el(*args, "--json", timeout=300)
    printed.extend([job.stdout, job.stderr])
    job_id = job.json()["id"]
    trials = el.ok("trial", "list", "--job", job_id, "--json").json()
    assert len(trials) == 4
    by_task = {t["task"]: t for t in trials}
    assert by_task["note"]["reward"] is None and by_task["note"]["reward_note"] is not None
    assert by_task["dimension"]["reward"] == 1.0 and len(by_task["dimension"]["dimensions"]) == 2

    copied = tmp_path / "copied"
    for command in (("job", "get", job_id), ("job", "result", job_id), ("trial", "list", "--job", job_id)):
        run(*command)
        run(*command, "--json")
    run("job", "export", job_id)
    run("profile", "show", "team/canary@1", "--json")
    run("profile", "list")
    for trial in trials:
        for flags in ((), ("--json",), ("--steps",), ("--steps", "--json")):
            run("trial", "get", trial["id"], *flags)
        for phase in ("setup", "agent", "verifier", "artifacts"):
            run("trial", "logs", trial["id"], "--phase", phase)
            run("trial", "logs", trial["id"], "--phase", phase, "--json")
        run("trial", "artifacts", trial["id"], "-o", str(copied / trial["id"]))

    server = start_server(el, tmp_path / "serve.log", "--workers", "0")
    responses: list[str] = []
    try:
        remote = {"ENVLOOP_URL": server.url, "ENVLOOP_API_KEY": server.key}
        run("trial", "get", trials[0]["id"], "--steps", env=remote)
        run("job", "result", job_id, env=remote)
        with server.http() as http:
            paths = [
                "/v1/jobs",
                f"/v1/jobs/{job_id}",
                f"/v1/jobs/{job_id}/result",
                f"/v1/jobs/{job_id}/trials",
                f"/v1/jobs/{job_id}/export",
                "/v1/profiles",
                "/v1/profiles/team/canary@1",
            ]
            for trial in trials:
                base = f"/v1/trials/{trial['id']}"
                paths += [base, f"{base}/steps", f"{base}/steps?format=atif", f"{base}/artifacts"]
                paths += [f"{base}/logs?phase={p}" for p in ("setup", "agent", "verifier", "artifacts")]
                paths += [f"{base}/artifacts/{a['path']}" for a in http.get(f"{base}/artifacts").json()]
            for path in paths:
                answer = http.get(path)
                assert answer.status_code == 200, (path, answer.text)
                responses.append(answer.text)
            share = http.post(f"/v1/jobs/{job_id}/shares", json={}).json()["token"]
            with server.http(share) as shared:
                responses.append(shared.get(f"/v1/jobs/{job_id}/trials").text)
            pages = ["/", f"/jobs/{job_id}", *(f"/trials/{t['id']}" for t in trials)]
            for page in pages:
                answer = http.get(page)
                if answer.status_code == 200:
                    responses.append(answer.text)
            assert len(responses) > len(paths) + 1, "the console served no page"
    finally:
        server.stop()

    leaks = [f"cli output {i}" for i, text in enumerate(printed) if SECRET in text]
    leaks += [f"api response {i}" for i, text in enumerate(responses) if SECRET in text]
    leaks += _files_holding(el.home, SECRET.encode())
    leaks += _files_holding(copied, SECRET.encode())
    assert leaks == []
