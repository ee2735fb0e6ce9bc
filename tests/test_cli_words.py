"""The CLI as read in an 80-column terminal: IDs are never cut (every job ID shares its first
characters with the others, so a cut one names nothing), other columns wrap instead; counts agree
with their nouns; `el --version`; a job's name and note go in with `--name` / `--note` and come
back in lists, `el job get` and exports."""

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

from envloop import __version__
from envloop.services import datasets, job_submission, profiles
from envloop.services.context import Context
from tests.conftest import EXAMPLES, El

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def in_terminal(el: El, *args: str, columns: int = 80) -> str:
    """`el ARGS` with its output on a pseudo-terminal `columns` wide, as a user sees it."""
    primary, secondary = pty.openpty()
    env = {**os.environ, "ENVLOOP_HOME": str(el.home), "COLUMNS": str(columns), "LINES": "50"}
    env.update(TERM="xterm", NO_COLOR="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "envloop", *args], stdout=secondary, stderr=subprocess.PIPE, env=env
    )
    os.close(secondary)
    chunks = []
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(primary)
    assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    return ANSI.sub("", b"".join(chunks).decode()).replace("\r\n", "\n")


def _jobs(ctx: Context, count: int) -> list[str]:
    ref = datasets.push_dataset(ctx, EXAMPLES / "tasks", "demo").ref
    document = profiles.read_profile_file(EXAMPLES / "profiles" / "oracle.json")
    document = document.model_copy(update={"name": None, "version": None})
    profiles.create_profile(ctx, "demo/oracle-with-a-long-profile-name", "1", document)
    return [
        job_submission.submit_job(
            ctx,
            job_submission.JobRequest(
                dataset=ref,
                profiles=["demo/oracle-with-a-long-profile-name@1"],
                name=f"nightly run number {i} of the oracle",
                tags={"purpose": "a tag long enough to need wrapping"},
            ),
        ).job.id
        for i in range(count)
    ]


def test_el_job_list_shows_every_full_id_in_80_columns(el: El, ctx: Context) -> None:
    ids = _jobs(ctx, 3)
    text = in_terminal(el, "job", "list")
    assert all(job_id in text for job_id in ids), text
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "nightly" in text


def test_el_trial_list_shows_every_full_id_in_60_columns(el: El, ctx: Context) -> None:
    [job] = _jobs(ctx, 1)
    trials = [t["id"] for t in el.ok("trial", "list", "--job", job, "--json").json()]
    text = in_terminal(el, "trial", "list", "--job", job, columns=60)
    assert trials and all(trial in text for trial in trials), text


def test_el_version_prints_the_package_version(el: El) -> None:
    result = el.ok("--version")
    assert result.stdout == f"el {__version__}\n"


def test_counts_agree_with_their_nouns(el: El, ctx: Context) -> None:
    # Pushed again below, as the same revision.
    datasets.push_dataset(ctx, EXAMPLES / "tasks" / "hello-file", "one")
    pushed = el.ok("dataset", "push", str(EXAMPLES / "tasks"), "--name", "five").stderr
    assert "1 tasks" not in pushed and "5 tasks" in pushed
    single = el.ok("dataset", "push", str(EXAMPLES / "tasks" / "hello-file"), "--name", "one").stderr
    assert "1 task," in single
    profiles.create_profile(
        ctx, "demo/oracle", "1", profiles.read_profile_file(EXAMPLES / "profiles" / "oracle.json")
    )
    submitted = el("job", "submit", "--dataset", "one@1", "--profile", "demo/oracle@1", "--json")
    assert "1 trial (one@1 × 1 profile × 1 attempt)" in submitted.stderr


def test_a_jobs_name_and_note_are_kept_listed_and_exported(el: El, ctx: Context, tmp_path: Path) -> None:
    datasets.push_dataset(ctx, EXAMPLES / "tasks", "demo")
    el.ok("profile", "create", "demo/nop", "1", "--file", str(EXAMPLES / "profiles" / "nop.json"))
    job = el.ok(
        *("job", "submit", "--dataset", "demo@1", "--profile", "demo/nop@1", "--task", "hello-file"),
        *("--name", "baseline", "--note", "before the prompt change\nsecond line", "--json"),
    ).json()
    assert (job["name"], job["note"]) == ("baseline", "before the prompt change\nsecond line")
    assert "baseline" in el.ok("job", "list").stdout
    shown = el.ok("job", "get", job["id"]).stdout
    assert "name baseline" in shown and "note before the prompt change" in shown
    exported = el.ok("job", "export", job["id"]).json()
    assert (exported["name"], exported["note"]) == ("baseline", "before the prompt change\nsecond line")
    refused = el("job", "submit", "--dataset", "demo@1", "--profile", "demo/nop@1", "--name", "two\nlines")
    assert refused.code == 2 and refused.stderr.startswith("el: error: ") and "name" in refused.stderr
