"""A profile's API key sent through every path a chat trial has (the endpoint's answer, its reasoning,
its error messages, streamed and not, both protocols), then looked for everywhere envloop keeps
anything: every file under ENVLOOP_HOME and every table of the store except the one that holds
secrets on purpose, plus everything the CLI prints."""

import asyncio
import fcntl
import json
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from envloop.core.ids import new_id
from envloop.core.trial import TrialSpec
from envloop.models import close_clients
from envloop.runners.chat import ChatRunner
from envloop.testing import Received, Reply, ScriptedServer
from tests.conftest import El, stop_background_worker, write_profile

KEY = "sk-live-7f3a9c2e/Secret+Key_0042"
ROWS = [
    {"id": "echo", "prompt": "Repeat your credentials.", "answer": "no"},
    {"id": "fail", "prompt": "Trigger an error.", "answer": "no"},
]
STORE_FILES = ("envloop.db", "envloop.db-wal", "envloop.db-shm")


def leaky(received: Received) -> Reply:
    if received.prompt == "Trigger an error.":
        return Reply(status=400, error=f"key {KEY} may not use model {received.model}")
    return Reply(text=f"Your key is {KEY}.", reasoning=f"The header said Bearer {KEY}")


def wait_for_worker_exit(home: Path) -> None:
    stop_background_worker(home)
    lock = home / "background-worker.lock"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with lock.open("a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                time.sleep(0.1)
                continue
            return
    raise AssertionError("the background worker did not exit")


def store_without_secrets_table(home: Path, scratch: Path) -> bytes:
    """The store's bytes once the WAL is folded in: secrets are encrypted at rest, so the key is in
    no table, profile_secrets included (its two values are ciphertexts)."""
    with sqlite3.connect(home / "envloop.db") as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    copy = scratch / "store-copy.db"
    shutil.copyfile(home / "envloop.db", copy)
    conn = sqlite3.connect(copy)
    try:
        conn.execute("PRAGMA journal_mode=DELETE")
        values = [r[0] for r in conn.execute("SELECT value FROM profile_secrets")]
        assert len(values) == 2 and all(v.startswith("fernet:") for v in values)
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):  # names from sqlite_master
                assert KEY not in repr(row), f"the key is stored in clear in table {table}: {row!r}"
    finally:
        conn.close()
    return copy.read_bytes()


@pytest.mark.slow
def test_the_api_key_never_reaches_the_store_files_logs_or_output_in_clear(
    el: El, home: Path, tmp_path: Path
) -> None:
    dataset = tmp_path / "probe.jsonl"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    printed: list[str] = []

    def run(*args: str) -> str:
        result = el(*args, timeout=180)
        # A followed job that ends failed exits 3 (two of these trials fail on purpose).
        assert result.code in ((0, 3) if "--wait" in args else (0,)), result.stderr
        printed.extend([result.stdout, result.stderr])
        return result.stdout

    with ScriptedServer(default=leaky, api_key=KEY) as server:
        run("dataset", "push", str(dataset), "--name", "probe", "--scorer", "includes")
        refs = []
        for protocol, url, stream in (
            ("openai", server.openai_url, "false"),
            ("anthropic", server.anthropic_url, "true"),
        ):
            params = {
                "MODEL_PROTOCOL": protocol,
                "MODEL_BASE_URL": url,
                "MODEL_NAME": "leaky/sft",
                "MODEL_API_KEY": KEY,
                "STREAM": stream,
            }
            profile = write_profile(tmp_path / f"{protocol}.json", params, secret=["MODEL_API_KEY"])
            run("profile", "create", f"team/{protocol}", "1", "--file", str(profile))
            refs.append(f"team/{protocol}@1")
        job = json.loads(
            run(
                "job",
                "submit",
                "--dataset",
                "probe@1",
                "--profile",
                refs[0],
                "--profile",
                refs[1],
                "--wait",
                "--json",
            )
        )
    assert len(server.received) == 4
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in server.received)  # the key was used

    trials = json.loads(run("trial", "list", "--job", job["id"], "--json"))
    errors = sorted(t["error_type"] or "" for t in trials)
    assert errors == ["", "", "model_error", "model_error"]
    for trial in trials:
        run("trial", "get", trial["id"], "--steps")
        run("trial", "get", trial["id"], "--steps", "--json")
        run("trial", "logs", trial["id"])
        run("trial", "artifacts", trial["id"], "-o", str(tmp_path / "copied" / trial["id"]))
    run("job", "result", job["id"], "--json")
    run("job", "export", job["id"], "-o", str(tmp_path / "exported.json"))
    for ref in refs:
        run("profile", "show", ref, "--json")

    echo = next(t for t in trials if t["task"] == "echo" and t["profile"] == refs[1])
    shown = json.loads(run("trial", "get", echo["id"], "--steps", "--json"))
    model_step = shown["trajectory"]["steps"][1]
    assert (
        model_step["text"] == "Your key is ***." and model_step["reasoning"] == "The header said Bearer ***"
    )
    failed = next(t for t in trials if t["task"] == "fail")
    assert (
        failed["error_message"].startswith("HTTP 400 from")
        and "key *** may not use" in failed["error_message"]
    )

    wait_for_worker_exit(home)
    for text in printed:
        assert KEY not in text
    for path in [*home.rglob("*"), *(tmp_path / "copied").rglob("*"), tmp_path / "exported.json"]:
        if path.is_file() and path.name not in STORE_FILES:
            assert KEY.encode() not in path.read_bytes(), f"the key is in clear in {path}"
    assert KEY.encode() not in store_without_secrets_table(home, tmp_path)


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_an_endpoint_that_echoes_the_key_in_json_escaped_form_is_masked_too(
    tmp_path: Path, protocol: str
) -> None:
    """The trajectory file is JSON: a key with a quote or backslash appears escaped there."""
    key = 'sk-"quoted"\\path'
    with ScriptedServer(default=lambda r: Reply(text=f"echo {key}")) as server:
        url = server.openai_url if protocol == "openai" else server.anthropic_url
        params = {"MODEL_PROTOCOL": protocol, "MODEL_BASE_URL": url, "MODEL_NAME": "m", "MODEL_API_KEY": key}
        spec = TrialSpec(
            job_id="job_x",
            trial_id=new_id("trl"),
            task_name="q",
            attempt=1,
            profile_ref="p@1",
            runner="envloop/chat@1",
            params=params,
            secret_values=(key,),
            row={"id": "q", "prompt": "echo", "answer": "x"},
            scorer="exact",
            instance_root=tmp_path / "i",
            artifacts_dir=tmp_path / "a",
        )

        async def go() -> None:
            try:
                await ChatRunner().run(spec)
            finally:
                await close_clients()

        asyncio.run(go())
    for path in (tmp_path / "a").iterdir():
        raw = path.read_text()
        assert key not in raw and json.dumps(key)[1:-1] not in raw, path.name
        assert "***" in raw
