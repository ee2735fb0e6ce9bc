"""Specification of declared structured results (SPEC section 1, "Primary reward and structured results").

A verifier's result.json is validated when read; an invalid one gives no projection, with the
reason, and stays in the artifacts. Dimensions are aggregated only across trials whose definitions
(scale, direction, verifier version) agree. None of it changes the primary reward.
"""

import json
import math
from pathlib import Path
from typing import Any

import pytest

from envloop.core.structured import (
    MAX_BYTES,
    Definition,
    collect,
    definition_conflict,
    describe_reading,
    parse_structured,
    summarize,
)
from envloop.services import trials
from envloop.services.context import Context
from envloop.services.results import job_result
from tests.conftest import El, make_task, write_profile
from tests.test_compare_support import make_profile, push_tasks, run_job

FULL = {
    "schema_version": "envloop.result/v1",
    "verifier_version": "2",
    "composite": 0.82,
    "dimensions": {
        "correctness": {"value": 0.9, "scale": [0, 1], "direction": "higher"},
        "latency_s": {"value": 12.5, "scale": [0, None], "direction": "lower"},
    },
    "judges": [{"name": "style", "model": "judge-1", "score": 4, "summary": "Clear and short.\nMore."}],
}


def reading(document: Any) -> Any:
    return parse_structured(json.dumps(document).encode())


def dim(value: float, scale: list[float | None] | None = None, direction: str = "higher") -> dict[str, Any]:
    return {"value": value, "scale": scale if scale is not None else [0, 1], "direction": direction}


def test_a_complete_result_file_is_validated_into_its_projection() -> None:
    parsed = reading(FULL)
    assert parsed.error is None and parsed.result is not None
    assert parsed.result.composite == 0.82
    assert parsed.result.dimensions["latency_s"].scale == (0.0, None)
    assert parsed.result.judges[0].score == 4.0
    assert describe_reading(parsed) == [
        "structured result (verifier 2)",
        "  composite 0.82",
        "  correctness 0.9 on [0, 1] higher is better",
        "  latency_s 12.5 on [0, open] lower is better",
        "  judge style (judge-1) 4: Clear and short.",
    ]


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"{", "not valid JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b"\xff\xfe", "not UTF-8"),
        (b"{}", "neither a composite"),
        (b'{"composite": NaN}', "composite"),
        (b'{"composite": "high"}', "composite"),
        (json.dumps({"dimensions": {"acc": dim(1.5)}}).encode(), "outside its scale"),
        (json.dumps({"dimensions": {"acc": dim(0.5, [1, 0])}}).encode(), "low < high"),
        (json.dumps({"dimensions": {"acc": dim(0.5, direction="up")}}).encode(), "dimensions.acc.direction"),
        (json.dumps({"dimensions": {"acc": {"value": 1, "scale": [0, 1]}}}).encode(), "direction"),
        (json.dumps({"dimensions": {"acc": {**dim(1), "directon": "higher"}}}).encode(), "directon"),
        (json.dumps({"composite": 1, "extra": True}).encode(), "extra"),
        (json.dumps({"composite": 1, "schema_version": "other/v9"}).encode(), "schema_version"),
        (json.dumps({"judges": [{"name": "", "summary": "x"}]}).encode(), "judges.0.name"),
        (b" " * (MAX_BYTES + 1), "larger than"),
    ],
)
def test_an_invalid_result_file_gives_no_projection_and_a_one_line_reason(raw: bytes, reason: str) -> None:
    parsed = parse_structured(raw)
    assert parsed.result is None
    assert parsed.error is not None and reason in parsed.error
    assert "\n" not in parsed.error
    assert describe_reading(parsed)[0].startswith("structured result invalid: ")


def test_dimensions_aggregate_over_trials_clustered_by_task() -> None:
    pairs = [
        ("a", reading({"composite": 1.0, "dimensions": {"acc": dim(1.0)}})),
        ("a", reading({"composite": 0.0, "dimensions": {"acc": dim(0.0)}})),
        ("b", reading({"dimensions": {"acc": dim(1.0)}})),
        ("c", reading({"dimensions": {"acc": dim(0.5)}})),
        ("c", parse_structured(b"not json")),
    ]
    summary = summarize(collect(pairs))
    assert (summary.trials, summary.invalid) == (4, 1)
    acc = summary.dimensions["acc"]
    assert acc.conflict is None and acc.aggregate is not None
    assert acc.aggregate.mean == pytest.approx(2.5 / 4)
    assert (acc.aggregate.trials, acc.aggregate.tasks) == (4, 3)
    # Miller 2024 clustered variance: residual sums -0.25, 0.375, -0.125 over three tasks.
    expected = math.sqrt(3 / 2 * (0.25**2 + 0.375**2 + 0.125**2)) / 4
    assert acc.aggregate.stderr == pytest.approx(expected, rel=1e-12)
    assert acc.aggregate.ci95 is not None and acc.aggregate.ci95[0] >= 0.0  # clamped to its scale
    assert summary.composite is not None
    assert (summary.composite.mean, summary.composite.tasks, summary.composite.stderr) == (0.5, 1, None)


@pytest.mark.parametrize(
    ("other", "field"),
    [
        ({"dimensions": {"acc": dim(3.0, [1, 5])}}, "scale differs"),
        ({"dimensions": {"acc": dim(0.5, direction="lower")}}, "direction differs"),
        ({"verifier_version": "2", "dimensions": {"acc": dim(0.5)}}, "verifier version differs"),
    ],
)
def test_a_dimension_defined_differently_across_trials_is_not_aggregated(
    other: dict[str, Any], field: str
) -> None:
    pairs = [("a", reading({"dimensions": {"acc": dim(1.0)}})), ("b", reading(other)), ("c", reading(other))]
    acc = summarize(collect(pairs)).dimensions["acc"]
    assert acc.aggregate is None and acc.definition is None
    assert (
        acc.conflict is not None and "in 2 trials; " in acc.conflict and acc.conflict.endswith(" in 1 trial")
    )
    parsed = reading(other).result
    assert parsed is not None
    theirs = parsed.dimensions["acc"]
    conflict = definition_conflict(
        "acc",
        Definition(scale=(0, 1), direction="higher", verifier_version=None),
        Definition(scale=theirs.scale, direction=theirs.direction, verifier_version=parsed.verifier_version),
    )
    assert conflict is not None and conflict.startswith(f"acc: {field}")


def test_an_invalid_file_stays_raw_in_the_artifacts_and_the_reward_is_untouched(
    ctx: Context, tmp_path: Path
) -> None:
    dataset = push_tasks(ctx, tmp_path, "st", ["a", "b"])
    profile = make_profile(ctx, tmp_path, "st/p")
    documents = {
        "a": FULL,
        "b": '{"dimensions": {"acc": {"value": 2, "scale": [0, 1], "direction": "higher"}}}',
    }
    job_id = run_job(ctx, dataset, [profile], 1, lambda *_: 1.0, lambda _p, task, _a: documents[task])
    views = {v.task: v for v in trials.list_trials(ctx, job_id)}
    assert all(v.structured is None for v in views.values())  # lists never read the files
    good, bad = trials.get_trial(ctx, views["a"].id), trials.get_trial(ctx, views["b"].id)
    assert good.structured is not None and good.structured.result is not None
    assert good.structured.result.dimensions["correctness"].value == 0.9
    assert bad.structured is not None and bad.structured.result is None
    assert bad.structured.error is not None and "outside its scale" in bad.structured.error
    assert "result.json" in {a.path.rsplit("/", 1)[-1] for a in trials.list_artifacts(ctx, views["b"].id)}
    assert (good.reward, bad.reward) == (1.0, 1.0)


def test_the_job_result_aggregates_structured_values_per_profile_and_skips_invalidated_trials(
    ctx: Context, tmp_path: Path
) -> None:
    dataset = push_tasks(ctx, tmp_path, "agg", ["a", "b", "c"])
    one, two = make_profile(ctx, tmp_path, "agg/one"), make_profile(ctx, tmp_path, "agg/two")
    values = {"a": 0.2, "b": 0.4, "c": 0.9}

    def document(profile: str, task: str, attempt: int) -> object:
        if profile == two:
            return None
        return {"composite": values[task], "dimensions": {"acc": dim(values[task])}}

    job_id = run_job(ctx, dataset, [one, two], 1, lambda *_: 1.0, document)
    result = job_result(ctx, job_id).profiles
    acc = result[one].structured.dimensions["acc"].aggregate
    assert acc is not None and acc.mean == pytest.approx(0.5)
    assert result[two].structured.trials == 0 and result[two].structured.dimensions == {}
    trial_c = next(v for v in trials.list_trials(ctx, job_id, task="c") if v.profile == one)
    trials.invalidate_trial(ctx, trial_c.id, "judge outage")
    again = job_result(ctx, job_id).profiles[one].structured
    assert again.trials == 2
    assert again.composite is not None and again.composite.mean == pytest.approx(0.3)


def test_trial_get_shows_the_structured_result_and_the_json_carries_it(
    el: El, ctx: Context, tmp_path: Path
) -> None:
    dataset = push_tasks(ctx, tmp_path, "cli", ["a"])
    profile = make_profile(ctx, tmp_path, "cli/p")
    job_id = run_job(ctx, dataset, [profile], 1, lambda *_: 0.5, lambda *_: FULL)
    (trial,) = trials.list_trials(ctx, job_id)
    text = el.ok("trial", "get", trial.id).stdout
    assert "structured result (verifier 2)" in text
    assert "correctness 0.9 on [0, 1] higher is better" in text
    data = el.ok("trial", "get", trial.id, "--json").json()
    assert data["structured"]["result"]["dimensions"]["latency_s"]["scale"] == [0.0, None]
    assert data["structured"]["error"] is None
    result = el.ok("job", "result", job_id, "--json").json()["profiles"][profile]
    assert result["structured"]["dimensions"]["correctness"]["aggregate"]["mean"] == 0.9
    assert {"stderr", "ci95", "score_counts"} <= result.keys()
    shown = el.ok("job", "result", job_id).stdout
    assert "structured results: 1 trial" in shown
    assert "correctness  0.9 over 1 trial, 1 task   [0, 1] higher is better" in shown


VERIFIER = """logs="${ENVLOOP_LOGS_DIR:-/logs}"; app="${ENVLOOP_APP_DIR:-/app}"
if [ -f "$app/done" ]; then r=1; else r=0; fi
echo "$r" > "$logs/verifier/reward.txt"
dimension='{"value": '$r', "scale": [0, 1], "direction": "higher"}'
judges='[{"name": "style", "summary": "tidy"}]'
echo '{"verifier_version": "1", "composite": '$r', "dimensions": {"solved": '"$dimension"'},
  "judges": '"$judges"'}' > "$logs/verifier/result.json"
"""


@pytest.mark.slow
def test_a_verifier_result_json_travels_from_the_sandbox_to_trial_job_board_and_comparison(
    el: El, tmp_path: Path
) -> None:
    """Real sandboxes: the oracle solves both tasks, nop neither; the verifier declares a dimension."""
    tasks = tmp_path / "tasks"
    for name in ("one", "two"):
        make_task(tasks, name, solve='touch "${ENVLOOP_APP_DIR:-/app}/done"', test=VERIFIER)
    el.ok("dataset", "push", str(tasks), "--name", "structured")
    for name, agent in (("oracle", "oracle"), ("nop", "nop")):
        profile = write_profile(tmp_path / f"{name}.json", {"AGENT_NAME": agent})
        el.ok("profile", "create", f"e2e/{name}", "1", "--file", str(profile))
    job = el.ok(
        "job",
        "submit",
        "--dataset",
        "structured@1",
        "--profile",
        "e2e/nop@1",
        "--profile",
        "e2e/oracle@1",
        "--attempts",
        "2",
        "--wait",
        "--json",
        timeout=300,
    ).json()
    assert job["status"] == "completed"
    listed = el.ok("trial", "list", "--job", job["id"], "--json").json()
    solved = next(t for t in listed if t["profile"] == "e2e/oracle@1")
    detail = el.ok("trial", "get", solved["id"], "--json").json()
    assert detail["structured"]["result"]["dimensions"]["solved"]["value"] == 1.0
    result = el.ok("job", "result", job["id"], "--json").json()["profiles"]
    assert result["e2e/oracle@1"]["structured"]["dimensions"]["solved"]["aggregate"]["mean"] == 1.0
    assert result["e2e/nop@1"]["structured"]["composite"]["mean"] == 0.0
    rows = el.ok("leaderboard", "add", job["id"], "--json").json()
    assert [(r["profile"], r["rank"], r["composite"]["mean"]) for r in rows] == [
        ("e2e/oracle@1", 1, 1.0),
        ("e2e/nop@1", 2, 0.0),
    ]
    compared = el.ok("job", "compare", job["id"], "--json").json()
    assert (compared["difference"], compared["n_tasks"]) == (1.0, 2)
    assert compared["dimensions"][0]["difference"] == 1.0


def test_a_finished_jobs_result_is_kept_until_a_trial_is_invalidated_or_restored(
    ctx: Context, tmp_path: Path
) -> None:
    dataset = push_tasks(ctx, tmp_path, "kept", ["a", "b"])
    profile = make_profile(ctx, tmp_path, "kept/p")
    running = run_job(ctx, dataset, [profile], 2, lambda _p, _t, attempt: "running" if attempt == 2 else 1.0)
    assert job_result(ctx, running) is not job_result(ctx, running)  # not finished: built each time
    job_id = run_job(ctx, dataset, [profile], 1, lambda _p, task, _a: 1.0 if task == "a" else 0.0)
    first = job_result(ctx, job_id)
    assert job_result(ctx, job_id) is first and first.profiles[profile].score == 0.5
    trial_b = next(v for v in trials.list_trials(ctx, job_id) if v.task == "b")
    trials.invalidate_trial(ctx, trial_b.id, "flaky verifier")
    assert job_result(ctx, job_id).profiles[profile].score == 1.0
    trials.invalidate_trial(ctx, trial_b.id, None, undo=True)
    assert job_result(ctx, job_id).profiles[profile].score == 0.5
