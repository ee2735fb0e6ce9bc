"""Trial flags: recorded with the outcome, secrets masked in every field, and shown by `el trial get`
(human and JSON), `el job result`, the API, the console's trial and job pages; a flag never
changes a reward."""

from pathlib import Path

import pytest

from envloop.core.trial import TrialFlag, TrialOutcome
from envloop.services.context import Context
from tests.api_server import Server
from tests.recorded_trials import recorded_job

SECRET = "sk-flag-secret-0b7e"
PTH = f"/usr/lib/python3/dist-packages/zz-{SECRET}.pth"
BINARY = "/usr/local/bin/python3"


def _flagged_job(ctx: Context, tmp_path: Path) -> tuple[str, dict[str, str]]:
    """A job of two tasks: `a` solved and flagged for tamper (a path holding a secret), `b` solved
    and clean; trial IDs by task."""

    def outcome_of(task: str) -> TrialOutcome:
        flags = (
            [TrialFlag(kind="tamper", detail="python import path", paths=[PTH, BINARY])]
            if task == "a"
            else []
        )
        return TrialOutcome(status="completed", reward=1.0, flags=flags)

    return recorded_job(ctx, tmp_path, SECRET, outcome_of)


@pytest.mark.parametrize("store_url", ["sqlite", "postgresql"], indirect=True)
def test_a_flag_is_kept_masked_and_shown_everywhere_without_changing_the_reward(
    ctx: Context, server: Server, tmp_path: Path
) -> None:
    job_id, ids = _flagged_job(ctx, tmp_path)
    masked = PTH.replace(SECRET, "***")
    expected = [{"kind": "tamper", "detail": "python import path", "paths": [masked, BINARY]}]

    shown = server.el.ok("trial", "get", ids["a"], "--json").json()
    assert (shown["flags"], shown["reward"]) == (expected, 1.0)
    assert server.el.ok("trial", "get", ids["b"], "--json").json()["flags"] == []
    text = server.el.ok("trial", "get", ids["a"]).stdout
    assert f"flag tamper: python import path: {masked}, {BINARY}" in text
    assert SECRET not in text

    result = server.el.ok("job", "result", job_id, "--json").json()
    assert result["flags"] == {"flagged": 1, "by_kind": {"tamper": 1}}
    assert result["profiles"]["team/nop@1"]["score"] == 1.0  # the flag changed nothing
    [group] = result["diagnosis"]["flags"]
    assert (group["kind"], group["detail"], group["count"], group["trial_ids"]) == (
        "tamper", "python import path", 1, [ids["a"]],
    )  # fmt: skip
    assert "1 trial flagged (tamper 1)" in server.el.ok("job", "result", job_id).stdout
    [row] = server.el.ok("leaderboard", "add", job_id, "--json").json()
    assert (row["flagged"], row["flags"], row["lower_bound"]) == (1, {"tamper": 1}, 1.0)
    assert ", 1 flagged" in server.el.ok("leaderboard", "show").stdout

    with server.http() as http:
        assert http.get(f"/v1/trials/{ids['a']}").json()["flags"] == expected
        trial_page = http.get(f"/trials/{ids['a']}").text
        job_page = http.get(f"/jobs/{job_id}").text
    assert "flagged: tamper" in trial_page and masked in trial_page and SECRET not in trial_page
    assert "1 trial flagged (tamper 1)" in job_page and "Flagged trials" in job_page
    assert '<td class="flagged">1</td>' in http_board(server)


def http_board(server: Server) -> str:
    with server.http() as http:
        return http.get("/leaderboard").text
