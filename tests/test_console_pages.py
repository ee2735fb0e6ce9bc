"""The console over real HTTP against a real `el serve` with real jobs: who may see what (keys,
login cookie, CSRF, share links), that every page shows the API's numbers, and that text from
tasks, agents and verifiers is escaped. The browser suite (test_console_browser.py) drives the same
pages in chromium."""

import re
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import httpx
import pytest
from sqlalchemy import update

from envloop.core.display import coverage_line, format_difference, format_score
from envloop.core.words import plural
from envloop.services.context import open_context
from envloop.services.job_submission import JobRequest, submit_job
from envloop.services.jobs import cancel_job
from envloop.services.results import ProfileResult
from envloop.store.tables import Job, Trial
from tests import pg
from tests.api_server import Server
from tests.console_support import (
    HOSTILE,
    HOSTILE_OUTPUT,
    HOSTILE_TAG,
    Jobs,
    console_server,
    run_on_server,
    trials_of,
)
from tests.pg import BACKENDS

HOSTILE_TASK = "<script>window.__pwned=4</script>"


@pytest.fixture(scope="module", params=BACKENDS)
def running(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Server, Jobs]]:
    """The server and its jobs on SQLite, then on PostgreSQL (the team server's store)."""
    root = tmp_path_factory.mktemp(f"console-{request.param}")
    with pytest.MonkeyPatch.context() as patch:
        if request.param == "sqlite":
            patch.delenv("ENVLOOP_DATABASE_URL", raising=False)
            with console_server(root) as found:
                yield found
            return
        databases: pg.Databases = request.getfixturevalue("postgres_databases")
        with databases.fresh() as url:
            patch.setenv("ENVLOOP_DATABASE_URL", url)
            with console_server(root) as found:
                yield found


@pytest.fixture
def server(running: tuple[Server, Jobs]) -> Server:
    return running[0]


@pytest.fixture
def jobs(running: tuple[Server, Jobs]) -> Jobs:
    return running[1]


def browser_like(server: Server) -> httpx.Client:
    """No Authorization header: what a browser without a session sends."""
    return httpx.Client(base_url=server.url, timeout=60, follow_redirects=False)


def login(server: Server, key: str | None = None) -> httpx.Client:
    client = browser_like(server)
    form = client.get("/login?next=/")
    token = re.search(r'name="login_token" value="([^"]+)"', form.text)
    assert token is not None
    answer = client.post(
        "/login", data={"key": key or server.key, "login_token": token.group(1), "next": "/"}
    )
    assert answer.status_code == 303, answer.text
    return client


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]*)"', html)
    assert found is not None
    return found.group(1)


def seed_result(server: Server, job_id: str) -> ProfileResult:
    with server.http() as http:
        body = http.get(f"/v1/jobs/{job_id}/result").json()
    return ProfileResult.model_validate(body["profiles"]["team/shell@1"])


def test_the_jobs_list_with_a_bearer_key_links_each_job_by_its_id(server: Server, jobs: Jobs) -> None:
    with server.http() as http:
        page = http.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    for job_id in (jobs.seed, jobs.agent):
        assert f'href="/jobs/{job_id}"' in page.text
    assert 'score <strong class="score">60%</strong>' in page.text


def test_the_job_page_shows_the_seed_examples_coverage_as_the_api_computes_it(
    server: Server, jobs: Jobs
) -> None:
    metrics = seed_result(server, jobs.seed)
    assert coverage_line(metrics) == "score 60%, 5/6 attempts scored, 2/3 members complete"
    with server.http() as http:
        html = http.get(f"/jobs/{jobs.seed}").text
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))
    assert "score 60%, 5/6 attempts scored, 2/3 members complete" in text
    assert f"pass@2 {format_score(metrics.pass_at_k)}" in text and "pass@2 100%" in text
    assert f"pass^2 {format_score(metrics.pass_hat_k)}" in text and "pass^2 50%" in text
    assert "1 missing: 1 finished without a reward" in text
    # How the trials were isolated and what they warn about, as the API's diagnosis says.
    with server.http() as http:
        found = http.get(f"/v1/jobs/{jobs.seed}/diagnosis").json()
    assert "Sandbox and warnings" in text
    for mode, count in found["sandboxes"].items():
        assert f"{count} {mode}" in text
    for warning in found["warnings"]:
        assert warning["text"] in text


def test_pages_without_credentials_send_the_browser_to_the_login_form(server: Server, jobs: Jobs) -> None:
    with browser_like(server) as client:
        for path in (
            "/",
            f"/jobs/{jobs.seed}",
            f"/jobs/{jobs.seed}/samples?q=x",
            f"/compare?a={jobs.seed}&b={jobs.seed}",
            f"/trials/{jobs.agent_trial}/trace",
            "/leaderboard",
        ):
            answer = client.get(path)
            assert answer.status_code == 303, path
            assert answer.headers["location"].startswith("/login?next=")
        assert client.post(f"/jobs/{jobs.seed}/cancel").status_code == 401
    with server.http(key="elk_not-a-key") as wrong:
        answer = wrong.get("/", follow_redirects=False)
        assert answer.status_code == 303 and "problem=" in answer.headers["location"]


def test_login_keeps_the_key_in_an_httponly_cookie_and_refuses_a_forged_form(server: Server) -> None:
    with closing(login(server)) as client:
        cookie = next(c for c in client.cookies.jar if c.name == "envloop_session")
        assert cookie.has_nonstandard_attr("HttpOnly")
        assert client.get("/").status_code == 200
    with browser_like(server) as stranger:
        forged = stranger.post("/login", data={"key": server.key, "login_token": "x", "next": "/"})
        assert forged.status_code == 403 and "envloop_session" not in forged.headers.get("set-cookie", "")
    with browser_like(server) as client:
        token = re.search(r'name="login_token" value="([^"]+)"', client.get("/login").text)
        assert token is not None
        bad = client.post("/login", data={"key": "elk_wrong", "login_token": token.group(1), "next": "/"})
        assert bad.status_code == 401 and "unknown or revoked API key" in bad.text


def test_login_only_sends_the_browser_back_to_a_path_of_this_server(server: Server) -> None:
    with browser_like(server) as client:
        token = re.search(r'name="login_token" value="([^"]+)"', client.get("/login").text)
        assert token is not None
        answer = client.post(
            "/login", data={"key": server.key, "login_token": token.group(1), "next": "//evil.example/x"}
        )
        assert answer.status_code == 303 and answer.headers["location"] == "/"


def test_an_action_from_a_session_needs_its_csrf_token(server: Server, jobs: Jobs) -> None:
    trial = trials_of(server, jobs.seed)[("B", 1)]
    with closing(login(server)) as client:
        refused = client.post(f"/trials/{trial['id']}/invalidate", data={"reason": "forged"})
        assert refused.status_code == 403
        refused = client.post(
            f"/trials/{trial['id']}/invalidate", data={"reason": "forged", "csrf": "0" * 64}
        )
        assert refused.status_code == 403
        assert trials_of(server, jobs.seed)[("B", 1)]["invalidated"] is False
        token = csrf_of(client.get(f"/trials/{trial['id']}").text)
        done = client.post(f"/trials/{trial['id']}/invalidate", data={"reason": "flaky host", "csrf": token})
        assert done.status_code == 303
        assert trials_of(server, jobs.seed)[("B", 1)]["invalidated_reason"] == "flaky host"
        assert seed_result(server, jobs.seed).score_counts.scored == 4
        restored = client.post(f"/trials/{trial['id']}/restore", data={"csrf": token})
        assert restored.status_code == 303
    assert seed_result(server, jobs.seed).score_counts.scored == 5


def test_an_invalidation_without_a_reason_is_refused_and_changes_nothing(server: Server, jobs: Jobs) -> None:
    trial = trials_of(server, jobs.seed)[("A", 2)]
    with server.http() as http:
        answer = http.post(f"/trials/{trial['id']}/invalidate", data={"reason": "  "})
    assert answer.status_code == 400 and "needs a reason" in answer.text
    assert trials_of(server, jobs.seed)[("A", 2)]["invalidated"] is False


def test_a_share_link_reads_its_job_and_trials_only(server: Server, jobs: Jobs) -> None:
    share = server.el.ok("job", "share", jobs.seed, "--json").json()
    other_trial = jobs.agent_trial
    own_trial = trials_of(server, jobs.seed)[("A", 1)]["id"]
    base = share["path"]
    with browser_like(server) as anonymous:
        page = anonymous.get(base)
        assert page.status_code == 200 and "5/6" in page.text
        assert "Cancel job" not in page.text and "Create share link" not in page.text
        assert anonymous.get(f"{base}/grid").status_code == 200
        assert anonymous.get(f"{base}/trials/{own_trial}").status_code == 200
        assert anonymous.get(f"{base}/trials/{own_trial}/trace").status_code == 200
        assert anonymous.get(f"{base}/export").status_code == 200
        samples = anonymous.get(f"{base}/samples", params={"q": "attempt 1 of"})
        assert samples.status_code == 200 and "3 samples match this query" in _text(samples.text)
        assert own_trial in samples.text and other_trial not in samples.text
        assert anonymous.get(f"{base}/breakdown").status_code == 200
        # Comparing is for the project's keys: a share link reads its one job and nothing else.
        assert anonymous.get(f"/compare?a={jobs.seed}&b={jobs.seed}").status_code == 303
        for path in (
            f"{base}/trials/{other_trial}",
            f"{base}/trials/{other_trial}/trace",
            f"{base}/trials/{other_trial}/artifacts/trajectory.json",
            f"{base}/trials/{other_trial}/trace/step/0",
        ):
            assert anonymous.get(path).status_code == 404, path
        assert anonymous.post(f"{base}/trials/{own_trial}/invalidate", data={"reason": "x"}).status_code in (
            404,
            405,
        )
        assert anonymous.get(f"/jobs/{jobs.seed}").status_code == 303
        # The token is not an API key: no session can be made of it, and `/` does not accept it.
        with server.http(share["token"]) as as_bearer:
            assert as_bearer.get("/", follow_redirects=False).status_code == 303
        with server.http() as http:
            http.post(f"/v1/shares/{share['id']}/revoke")
        assert anonymous.get(base).status_code == 404


def test_text_from_tasks_agents_and_verifiers_is_escaped(server: Server, jobs: Jobs) -> None:
    hostile = trials_of(server, jobs.seed)[("C", 2)]
    assert HOSTILE in (hostile["reward_note"] or "")
    with server.http() as http:
        pages = [
            http.get(f"/jobs/{jobs.seed}").text,
            http.get("/").text,
            http.get(f"/trials/{hostile['id']}").text,
            http.get(f"/trials/{hostile['id']}/logs").text,
            http.get(f"/trials/{jobs.agent_trial}/trace/step/3").text,
            http.get(f"/trials/{jobs.agent_trial}/trace?step=3").text,
        ]
    joined = "\n".join(pages)
    assert "<script>window" not in joined and "<img src=x" not in joined and "<b>bold" not in joined
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in joined
    assert "&lt;img src=x onerror=" in joined
    assert HOSTILE_TAG.replace("<", "&lt;").replace(">", "&gt;") in joined
    assert HOSTILE_OUTPUT  # the agent printed it; it shows only escaped (checked above)


def test_a_hostile_task_name_in_the_store_is_shown_as_text(server: Server) -> None:
    """Task names are validated at push time; the console still escapes one that got in otherwise."""
    ctx = open_context(server.el.home)
    try:
        job = submit_job(ctx, JobRequest(dataset="seed@1", profiles=["team/shell@1"], tasks=["A"])).job
        cancel_job(ctx, job.id)
        with ctx.store.write() as session:
            session.execute(update(Job).where(Job.id == job.id).values(tasks=[HOSTILE_TASK]))
            session.execute(update(Trial).where(Trial.job_id == job.id).values(task_name=HOSTILE_TASK))
    finally:
        ctx.close()
    with server.http() as http:
        grid = http.get(f"/jobs/{job.id}/grid").text
    assert "<script>window.__pwned=4" not in grid
    assert "&lt;script&gt;window.__pwned=4&lt;/script&gt;" in grid


def test_every_page_forbids_inline_scripts_and_framing(server: Server, jobs: Jobs) -> None:
    with server.http() as http:
        answer = http.get(f"/jobs/{jobs.seed}")
    policy = answer.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "'unsafe-inline'" not in policy
    assert "frame-ancestors 'none'" in policy
    assert answer.headers["referrer-policy"] == "no-referrer"


def test_artifacts_download_as_attachments_and_never_render(server: Server, jobs: Jobs) -> None:
    trial = trials_of(server, jobs.seed)[("C", 2)]["id"]
    with server.http() as http:
        answer = http.get(f"/trials/{trial}/artifacts/agent/stdout.txt")
        escape = http.get(f"/trials/{trial}/artifacts/../../../envloop.db")
    assert answer.status_code == 200 and HOSTILE_OUTPUT in answer.text
    assert answer.headers["content-type"] == "application/octet-stream"
    assert answer.headers["content-disposition"].startswith("attachment")
    assert "sandbox" in answer.headers["content-security-policy"]
    assert escape.status_code == 404


def test_the_trace_viewer_loads_steps_and_long_outputs_a_window_at_a_time(server: Server, jobs: Jobs) -> None:
    trial = jobs.agent_trial
    with server.http() as http:
        steps = http.get(f"/v1/trials/{trial}/steps").json()["steps"]
        window = http.get(f"/trials/{trial}/trace/steps", params={"offset": 2, "limit": 3}).text
        seq = next(s for s in steps if s.get("command") == "seq 1 30000")
        detail = http.get(f"/trials/{trial}/trace/step/{seq['index']}").text
        more = http.get(
            f"/trials/{trial}/trace/step/{seq['index']}/text", params={"field": "stdout", "offset": 20000}
        )
        unknown = http.get(f"/trials/{trial}/trace/step/{len(steps)}")
    assert re.findall(r'data-index="(\d+)"', window) == ["2", "3", "4"]
    assert f"Show all {len(seq['stdout'])} characters" in detail
    assert seq["stdout"][:20000] + more.text == seq["stdout"]
    assert more.headers["content-type"].startswith("text/plain") and more.headers["x-next-offset"] == ""
    assert unknown.status_code == 404


def test_the_leaderboard_page_shows_the_saved_rows(server: Server, jobs: Jobs) -> None:
    with server.http() as http:
        rows = http.post("/v1/leaderboard", json={"job_id": jobs.seed}).json()
        html = http.get("/leaderboard").text
    assert rows[0]["rank"] == 1
    assert f'href="/jobs/{jobs.seed}"' in html and "seed@1" in html
    # ranked by 3 of 6 attempts right (the missing one as 0), beside the mean of the 5 scored
    assert '<strong class="lower-bound">50%</strong>' in html and "<td>60%</td>" in html


def test_the_jobs_list_filters_by_status_and_tag(server: Server, jobs: Jobs) -> None:
    with server.http() as http:
        completed = http.get("/", params={"status": "completed"}).text
        failed = http.get("/", params={"status": "failed"}).text
        running = http.get("/", params={"status": "running"}).text
        tagged = http.get("/", params={"tag": f"note={HOSTILE_TAG}"}).text
        bad_tag = http.get("/", params={"tag": "no-equals-sign"}).text
        bad_status = http.get("/", params={"status": "finished"}).text
    # The seed job's broken verifier fails one trial on purpose, so the job ended failed.
    assert f'href="/jobs/{jobs.seed}"' in failed and f'href="/jobs/{jobs.agent}"' not in failed
    assert f'href="/jobs/{jobs.agent}"' in completed and f'href="/jobs/{jobs.seed}"' not in completed
    assert f'href="/jobs/{jobs.seed}"' not in running
    assert f'href="/jobs/{jobs.seed}"' in tagged and f'href="/jobs/{jobs.agent}"' not in tagged
    assert "invalid tag filter" in bad_tag
    assert "unknown status &#39;finished&#39;" in bad_status


def test_structured_results_show_on_the_job_page_and_the_trials_metrics_tab(
    server: Server, jobs: Jobs
) -> None:
    trial = trials_of(server, jobs.seed)[("B", 1)]["id"]
    with server.http() as http:
        job_html = http.get(f"/jobs/{jobs.seed}").text
        metrics_html = http.get(f"/trials/{trial}/metrics").text
        from_api = http.get(f"/v1/trials/{trial}").json()["structured"]["result"]
    assert from_api["composite"] == 0.8
    job_text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", job_html))
    assert "composite 0.8" in job_text and "correctness 0.9" in job_text
    assert "[0, 1] higher is better, verifier 2" in job_text
    assert "2 trials with a valid result" in job_text
    assert "Judge style (judge-1): 4" in metrics_html
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in metrics_html
    assert "<script>window" not in metrics_html


def test_a_large_log_is_shown_a_page_at_a_time(server: Server, jobs: Jobs) -> None:
    trial = trials_of(server, jobs.seed)[("A", 2)]["id"]
    ctx = open_context(server.el.home)
    try:
        log = ctx.artifacts.trial_dir(trial) / "verifier" / "stdout.txt"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("".join(f"verifier line {i}\n" for i in range(20_000)))
    finally:
        ctx.close()
    with server.http() as http:
        first = http.get(f"/trials/{trial}/logs").text
        found = re.search(r'href="\?file=verifier/stdout.txt&amp;offset=(\d+)">Next', first)
        assert found is not None
        second = http.get(
            f"/trials/{trial}/logs", params={"file": "verifier/stdout.txt", "offset": found[1]}
        ).text
        unknown = http.get(f"/trials/{trial}/logs", params={"file": "../../envloop.db"})
    assert "verifier line 0\n" in first and "verifier line 19999" not in first
    assert "← Previous" in second and "verifier line 0\n" not in second
    assert unknown.status_code == 400


def test_a_job_of_two_profiles_shows_their_paired_comparison(
    server: Server, jobs: Jobs, tmp_path: Path
) -> None:
    params = {
        "AGENT_NAME": "command",
        "AGENT_COMMAND": 'echo "$ENVLOOP_ATTEMPT" > "${ENVLOOP_APP_DIR:-/app}/attempt"',
    }
    request = JobRequest(dataset="seed@1", profiles=["team/shell@1", "team/twin@1"], attempts=2)
    job = run_on_server(server, tmp_path / "p.json", ("team/twin", params), request)
    with server.http() as http:
        # The seed's broken verifier fails its trials on purpose: the job ends failed.
        assert http.get(f"/v1/jobs/{job}").json()["status"] == "failed"
        compared = http.get("/v1/compare", params={"job_a": job}).json()
        html = http.get(f"/jobs/{job}").text
        grid = http.get(f"/jobs/{job}/grid").text
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))
    assert "Paired comparison between profiles" in text
    assert f"on {plural(compared['n_tasks'], 'task')} both scored" in text
    assert "B team/twin@1 against A team/shell@1" in text
    # One unit on every surface: the CLI's and the API's difference, in percentage points.
    assert compared["unit"] == "points"
    assert f"B − A {format_difference(compared['difference'], 'points')}" in text
    assert f"{compared['improved']} improved · {compared['regressed']} regressed" in text
    assert grid.count('class="cell-group"') == 6 and "spread across profiles" in grid


def test_a_progress_bar_shows_how_attempts_ended_in_parts(server: Server, jobs: Jobs) -> None:
    """The seed job: 5 of 6 trials completed, 1 failed (its verifier wrote no number)."""
    with server.http() as http:
        bar = http.get(f"/jobs/{jobs.seed}/progress").text
        listed = http.get("/").text
    widths = dict(re.findall(r'data-part="(\w+)" x="[\d.]+" y="0" width="([\d.]+)"', bar))
    assert widths == {"completed": "83.333", "failed": "16.667", "cancelled": "0.0", "running": "0.0"}
    assert "6/6 finished: 5 completed, 1 failed" in _text(bar)
    assert 'data-part="failed"' in listed


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_compare_and_samples_answer_a_bearer_key_and_a_login_session_alike(
    server: Server, jobs: Jobs, tmp_path: Path
) -> None:
    """The acceptance contract: /compare?a=JOB_A&b=JOB_B and /jobs/JOB/samples (?q= searches) take
    the same credentials as every console page, and the compare page says "N improved" and
    "M regressed"."""
    command = 'echo 2 > "${ENVLOOP_APP_DIR:-/app}/attempt"'
    params = {"AGENT_NAME": "command", "AGENT_COMMAND": command}
    request = JobRequest(dataset="seed@1", profiles=["team/always2@1"], attempts=2)
    other = run_on_server(server, tmp_path / "always2.json", ("team/always2", params), request)
    with server.http() as http:
        api = http.get("/v1/compare", params={"job_a": jobs.seed, "job_b": other}).json()
        by_bearer = http.get("/compare", params={"a": jobs.seed, "b": other})
        samples_by_bearer = http.get(f"/jobs/{jobs.seed}/samples", params={"q": "Do the B thing"})
        refused = http.get("/compare", params={"a": jobs.seed, "b": jobs.agent})
    with closing(login(server)) as session:
        by_session = session.get("/compare", params={"a": jobs.seed, "b": other})
        samples_by_session = session.get(f"/jobs/{jobs.seed}/samples", params={"q": "Do the B thing"})
    for answer in (by_bearer, by_session, samples_by_bearer, samples_by_session):
        assert answer.status_code == 200
    for answer in (by_bearer, by_session):
        text = _text(answer.text)
        assert f"{api['improved']} improved" in text and f"{api['regressed']} regressed" in text
        assert f"B − A {format_difference(api['difference'], api['unit'])}" in text
    assert (api["improved"], api["regressed"], api["unchanged"]) == (0, 1, 1)
    for answer in (samples_by_bearer, samples_by_session):
        assert "2 samples match this query" in _text(answer.text)
    assert refused.status_code == 400 and "they ran different dataset revisions" in _text(refused.text)


def test_a_key_of_another_project_sees_none_of_this_projects_jobs(server: Server, jobs: Jobs) -> None:
    other = server.el.ok("key", "create", "--project", "elsewhere", "--json").json()["key"]
    with server.http(other) as http:
        listed = http.get("/").text
        job_page = http.get(f"/jobs/{jobs.seed}")
        trial_page = http.get(f"/trials/{jobs.agent_trial}/trace")
        samples = http.get(f"/jobs/{jobs.seed}/samples")
        compared = http.get("/compare", params={"a": jobs.seed, "b": jobs.agent})
    assert jobs.seed not in listed and jobs.agent not in listed
    assert job_page.status_code == 404 and trial_page.status_code == 404
    assert samples.status_code == 404 and compared.status_code == 404


def test_logging_out_ends_the_session_and_a_revoked_key_ends_it_too(server: Server) -> None:
    created = server.el.ok("key", "create", "--name", "short-lived", "--json").json()
    with closing(login(server, created["key"])) as client:
        assert client.get("/").status_code == 200
        token = csrf_of(client.get("/").text)
        assert client.post("/logout", data={"csrf": "wrong"}).status_code == 403
        assert client.post("/logout", data={"csrf": token}).status_code == 303
        assert client.get("/").status_code == 303
    with closing(login(server, created["key"])) as client:
        server.el.ok("key", "revoke", created["id"])
        bounced = client.get("/")
        assert bounced.status_code == 303 and "revoked" in bounced.headers["location"]
