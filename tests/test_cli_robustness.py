"""`el` under hostile text and failing servers: every failure is one line on stderr with a
documented exit code (docs/reference/exit-codes.md), never a traceback; text that is not envloop's is
printed as it is; piped output keeps full IDs and whole lines."""

import json
import socket
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from envloop.services import job_submission
from envloop.services.context import Context
from tests.conftest import EXAMPLES, El
from tests.test_compare_support import make_profile, push_tasks, run_job

JOB_ID = "job_01m8q25aaaaaaaaaaaaaaaaaaa"
JOB = {
    "id": JOB_ID,
    "status": "running",
    "dataset": "d@1",
    "runner": "envloop/shell@1",
    "profiles": ["p@1"],
    "attempts": 1,
    "tasks": ["t"],
    "concurrency": None,
    "max_steps": None,
    "agent_timeout_sec": None,
    "verifier_timeout_sec": None,
    "tags": {},
    "request_id": None,
    "cancel_requested": False,
    "counts": {"pending": 0, "running": 1, "completed": 0, "failed": 0, "cancelled": 0},
    "created_at": datetime.now(UTC).isoformat(),
    "finished_at": None,
}

Handler = Callable[[BaseHTTPRequestHandler], None]


def _send(handler: BaseHTTPRequestHandler, status: int, body: bytes, kind: str = "application/json") -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", kind)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def _cut_off(handler: BaseHTTPRequestHandler, kind: str) -> None:
    """Promise a long body, send a little, then drop the connection."""
    handler.send_response(200)
    handler.send_header("Content-Type", kind)
    handler.send_header("Content-Length", "100000")
    handler.end_headers()
    handler.wfile.write(b"event: job\ndata: {\n" if "event" in kind else b"partial")
    handler.wfile.flush()
    handler.connection.shutdown(socket.SHUT_RDWR)


def _misbehaving(handler: BaseHTTPRequestHandler) -> None:
    path = handler.path.split("?")[0]
    if path == f"/v1/jobs/{JOB_ID}":
        _send(handler, 200, json.dumps(JOB).encode())
    elif path == f"/v1/jobs/{JOB_ID}/events":
        _cut_off(handler, "text/event-stream")
    elif path == "/v1/jobs/job_broken":
        _send(handler, 500, b'{"detail": "database is on fire"}')
    elif path == "/v1/jobs/job_html":
        _send(handler, 200, b"<html>a proxy's login page</html>", "text/html")
    elif path == "/v1/jobs/job_shape":
        _send(handler, 200, b'{"unexpected": true}')
    elif path == "/v1/trials/trl_x/artifacts":
        _send(handler, 200, b'[{"path": "agent/stdout.txt", "size": 100000}]')
    elif path.startswith("/v1/trials/trl_x/artifacts/"):
        _cut_off(handler, "application/octet-stream")
    else:
        _send(handler, 404, b'{"detail": "not here"}')


@pytest.fixture
def bad_server() -> Iterator[str]:
    class Answer(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            _misbehaving(self)

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _one_line(result: object, code: int) -> str:
    stderr = result.stderr  # type: ignore[attr-defined]
    assert result.code == code, stderr  # type: ignore[attr-defined]
    lines = [line for line in stderr.splitlines() if line.strip()]
    failures = [line for line in lines if line.startswith("el: ")]
    assert len(failures) == 1 and "Traceback" not in stderr, stderr
    assert lines[-1] == failures[0], stderr  # nothing follows it (a progress bar may precede it)
    return failures[0]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("job", "get", "job_broken"), "server error 500: database is on fire"),
        (("job", "get", "job_html"), "not JSON"),
        (("job", "get", "job_shape"), "not the API's"),
        (("job", "watch", JOB_ID), "lost the connection"),
    ],
)
def test_server_failures_are_one_line_and_exit_code_4(
    el: El, bad_server: str, args: tuple[str, ...], expected: str
) -> None:
    line = _one_line(el(*args, env={"ENVLOOP_URL": bad_server}, timeout=60), 4)
    assert expected in line


def test_a_download_cut_off_midway_is_one_line_and_exit_code_4(
    el: El, bad_server: str, tmp_path: Path
) -> None:
    result = el("trial", "artifacts", "trl_x", "-o", str(tmp_path / "out"), env={"ENVLOOP_URL": bad_server})
    assert "lost the connection" in _one_line(result, 4)


def test_an_unreachable_server_is_one_line_and_exit_code_4(el: El, refused_port: int) -> None:
    port = refused_port
    line = _one_line(el("job", "list", env={"ENVLOOP_URL": f"http://127.0.0.1:{port}"}), 4)
    assert "cannot reach the envloop server" in line


def test_reasons_and_text_from_users_are_printed_as_they_are(el: El, ctx: Context, tmp_path: Path) -> None:
    """A reason that looks like Rich markup neither crashes `el trial get` nor hides the marker."""
    dataset = push_tasks(ctx, tmp_path, "markup", ["t1"])
    profile = make_profile(ctx, tmp_path, "team/markup")
    job = run_job(ctx, dataset, [profile], 1, lambda *_: 1.0)
    (trial,) = el.ok("trial", "list", "--job", job, "--json").json()
    el.ok("trial", "invalidate", trial["id"], "--reason", "bad [/x] run [bold]loud[/bold] :smile:")
    shown = el.ok("trial", "get", trial["id"]).stdout
    assert "[invalidated: bad [/x] run [bold]loud[/bold] :smile:]" in shown
    el.ok("trial", "invalidate", trial["id"], "--undo")
    el.ok("trial", "invalidate", trial["id"], "--reason", "flaky host")
    assert "[invalidated: flaky host]" in el.ok("trial", "get", trial["id"]).stdout


def test_unknown_statuses_are_refused_not_matched_to_nothing(el: El, ctx: Context, tmp_path: Path) -> None:
    dataset = push_tasks(ctx, tmp_path, "status", ["t1"])
    profile = make_profile(ctx, tmp_path, "team/status")
    job = run_job(ctx, dataset, [profile], 1, lambda *_: 1.0)
    line = _one_line(el("job", "list", "--status", "bogus"), 2)
    assert "Invalid value for '--status'" in line and "'bogus' is not one of 'pending'" in line
    refused = _one_line(el("trial", "list", "--job", job, "--status", "done"), 2)
    assert "'done' is not one of 'pending', 'running', 'completed', 'failed', 'cancelled'" in refused
    sampled = _one_line(el("job", "samples", job, "--status", "done"), 2)
    assert "'cancelled', 'invalidated'." in sampled
    assert el.ok("job", "samples", job, "--status", "invalidated", "--json").json()["samples"] == []
    assert len(el.ok("trial", "list", "--job", job, "--status", "completed", "--json").json()) == 1


def test_piped_tables_keep_full_ids_and_warnings_stay_on_one_line(
    el: El, ctx: Context, tmp_path: Path
) -> None:
    dataset = push_tasks(ctx, tmp_path, "wide", ["a-task-with-a-rather-long-name-" + "x" * 60])
    profile = make_profile(ctx, tmp_path, "team/wide")
    job = run_job(ctx, dataset, [profile], 1, lambda *_: 1.0)
    (trial,) = el.ok("trial", "list", "--job", job, "--json").json()
    listed = el.ok("trial", "list", "--job", job).stdout
    assert trial["id"] in listed and trial["task"] in listed and "…" not in listed
    assert job in el.ok("job", "list").stdout
    params = {"AGENT_NAME": "nop", **{f"UNUSED_PARAM_NUMBER_{i}": "x" for i in range(20)}}
    path = tmp_path / "wide.json"
    path.write_text(json.dumps({"schema_version": "envplatform.profile/v2", "spec": {"params": params}}))
    el.ok("profile", "create", "team/unused", "1", "--file", str(path))
    submitted = el.ok("job", "submit", "--dataset", dataset, "--profile", "team/unused@1", "--json")
    warnings = [line for line in submitted.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "UNUSED_PARAM_NUMBER_19," in warnings[0]
    assert warnings[0].endswith("UNUSED_PARAM_NUMBER_9 (no effect)")


def test_a_dataset_without_a_revision_is_refused_naming_the_choices(
    el: El, ctx: Context, tmp_path: Path
) -> None:
    dataset = push_tasks(ctx, tmp_path, "bare", ["t1"])
    make_profile(ctx, tmp_path, "team/bare")
    line = _one_line(el("job", "submit", "--dataset", "bare", "--profile", "team/bare@1"), 2)
    assert "bare@1" in line and "bare@latest" in line
    assert el.ok("job", "list", "--json").json() == []
    latest = el.ok("job", "submit", "--dataset", "bare@latest", "--profile", "team/bare@1", "--json")
    assert latest.json()["dataset"] == dataset == "bare@1"


def test_an_idempotent_resubmission_says_only_that_it_was_already_submitted(
    el: El, ctx: Context, tmp_path: Path
) -> None:
    dataset = push_tasks(ctx, tmp_path, "again", ["t1"])
    profile = make_profile(ctx, tmp_path, "team/again")
    job_submission.submit_job(
        ctx, job_submission.JobRequest(dataset=dataset, profiles=[profile], request_id="r-1")
    )
    again = el.ok("job", "submit", "--dataset", dataset, "--profile", profile, "--request-id", "r-1")
    assert "already submitted" in again.stderr and "submitted job_" not in again.stderr.replace(
        "already submitted", ""
    )


def test_following_a_job_that_ends_failed_exits_3_after_printing_its_result(el: El) -> None:
    el.ok("dataset", "push", str(EXAMPLES / "tasks"), "--name", "demo")
    el.ok("profile", "create", "demo/oracle", "1", "--file", str(EXAMPLES / "profiles" / "oracle.json"))
    args = ("job", "submit", "--dataset", "demo@1", "--profile", "demo/oracle@1", "--wait")
    failed = el(*args, "--task", "broken-verifier", "--json", timeout=300)
    assert failed.code == 3, failed.stderr
    job = failed.json()
    assert job["status"] == "failed"
    assert f"warning: job {job['id']} ended failed (1 failed)" in failed.stderr
    assert "Traceback" not in failed.stderr
    assert el("job", "watch", job["id"], timeout=120).code == 3
    assert el(*args, "--task", "hello-file", timeout=300).code == 0
