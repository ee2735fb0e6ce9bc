"""What the human views of `el` show: every fact the JSON has that a person needs, and no field
that means nothing where it is printed."""

from pathlib import Path

from envloop.services import job_submission
from envloop.services.context import Context
from tests.conftest import El
from tests.test_compare_support import make_profile, push_tasks, run_job


def test_job_get_shows_the_jobs_tags_and_request_id(el: El, ctx: Context, tmp_path: Path) -> None:
    dataset = push_tasks(ctx, tmp_path, "views", ["t1"])
    profile = make_profile(ctx, tmp_path, "team/views")
    request = job_submission.JobRequest(
        dataset=dataset, profiles=[profile], request_id="nightly-42", tags={"team": "evals", "run": "7"}
    )
    job = job_submission.submit_job(ctx, request).job
    text = el.ok("job", "get", job.id).stdout
    assert "run=7" in text and "team=evals" in text
    assert "request ID nightly-42" in text
    bare = run_job(ctx, dataset, [profile], 1, lambda *_: 1.0)
    assert "tags —   request ID —" in el.ok("job", "get", bare).stdout


def test_every_phases_kept_output_is_readable(el: El, ctx: Context, tmp_path: Path) -> None:
    dataset = push_tasks(ctx, tmp_path, "phases", ["t1"])
    profile = make_profile(ctx, tmp_path, "team/phases")
    job = run_job(ctx, dataset, [profile], 1, lambda *_: 1.0)
    (trial,) = el.ok("trial", "list", "--job", job, "--json").json()
    kept = ctx.artifacts.trial_dir(trial["id"])
    files = {
        "setup/output.txt": "image ready\n",
        "agent/install.log": "$ npm install\n",
        "agent/stdout.txt": "agent said hi\n",
        "verifier/stderr.txt": "verifier warned\n",
        "collection/output.txt": "kept 3 files\n",
    }
    for rel, text in files.items():
        (kept / rel).parent.mkdir(parents=True, exist_ok=True)
        (kept / rel).write_text(text)
    expected = {
        "setup": {"output": "image ready\n"},
        "agent_setup": {"install": "$ npm install\n"},
        "agent": {"stdout": "agent said hi\n"},
        "verifier": {"stderr": "verifier warned\n"},
        "artifacts": {"output": "kept 3 files\n"},
    }
    for phase, streams in expected.items():
        assert el.ok("trial", "logs", trial["id"], "--phase", phase, "--json").json() == streams
        shown = el.ok("trial", "logs", trial["id"], "--phase", phase)
        assert shown.stdout == "".join(streams.values())
    (kept / "setup" / "output.txt").unlink()
    assert el.ok("trial", "logs", trial["id"], "--phase", "setup", "--json").json() == {}
    refused = el("trial", "logs", trial["id"], "--phase", "teardown")
    assert refused.code == 2
    assert refused.stderr == (
        "el: error: Invalid value for '--phase': Value error, 'teardown' is not one of 'setup', "
        "'agent_setup', 'agent', 'verifier', 'artifacts'. (see 'el trial logs --help')\n"
    )


def test_show_json_has_no_created_flag_which_only_means_something_on_push(
    el: El, ctx: Context, tmp_path: Path
) -> None:
    push_tasks(ctx, tmp_path, "first", ["t1"])
    pushed = el.ok("dataset", "push", str(next(tmp_path.glob("first-*"))), "--name", "again", "--json").json()
    assert pushed["created"] is True
    assert "created" not in el.ok("dataset", "show", "again@1", "--json").json()
    assert "created" not in el.ok("dataset", "list", "--json").json()[0]
    make_profile(ctx, tmp_path, "team/shown")
    assert "created" not in el.ok("profile", "show", "team/shown@1", "--json").json()
