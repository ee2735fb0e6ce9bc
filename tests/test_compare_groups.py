"""The compare page narrows and groups tasks by their metadata: a task-name search, a filter on a
field's value (a tag list holds each of its tags), and a group-by whose per-group tallies and B - A
come from the same paired differences as the page's header; the view of a baseline against several
candidates does the same for each candidate and overlays every run's rewards. Over HTTP against a
real server."""

import re
from pathlib import Path

import pytest

from envloop.services import datasets
from envloop.services.context import Context
from tests.api_server import Server
from tests.conftest import make_task
from tests.test_compare_support import make_profile, run_job

LABELS = {
    "parse-csv": 'category = "data"\ndifficulty = "easy"\ntags = ["io", "text"]',
    "parse-json": 'category = "data"\ndifficulty = "hard"\ntags = ["text"]',
    "fix-build": 'category = "code"\ndifficulty = "hard"',
    "plain": "",
}
A = {"parse-csv": 1.0, "parse-json": 1.0, "fix-build": 0.0, "plain": 1.0}
B = {"parse-csv": 0.0, "parse-json": 1.0, "fix-build": 1.0, "plain": 1.0}
C = {"parse-csv": 1.0, "parse-json": 0.0, "fix-build": 0.0, "plain": 0.0}


@pytest.fixture
def three(ctx: Context, tmp_path: Path) -> tuple[str, str, str]:
    folder = tmp_path / "labelled"
    for task, toml in LABELS.items():
        make_task(folder, task, toml=f"[metadata]\n{toml}\n" if toml else "")
    dataset = datasets.push_dataset(ctx, folder, "labelled").ref
    base, sft = make_profile(ctx, tmp_path, "team/base"), make_profile(ctx, tmp_path, "team/sft")
    return (
        run_job(ctx, dataset, [base], 1, lambda _p, task, _a: A[task]),
        run_job(ctx, dataset, [sft], 1, lambda _p, task, _a: B[task]),
        run_job(ctx, dataset, [sft], 1, lambda _p, task, _a: C[task]),
    )


@pytest.fixture
def pair(three: tuple[str, str, str]) -> tuple[str, str]:
    return three[0], three[1]


def _rows(html: str) -> list[str]:
    return [part.split('"', 1)[0] for part in html.split('<tr data-task="')[1:]]


def test_a_search_keeps_the_tasks_whose_name_holds_it(server: Server, pair: tuple[str, str]) -> None:
    with server.http() as http:
        page = http.get("/compare", params={"a": pair[0], "b": pair[1], "q": "PARSE"})
    assert page.status_code == 200, page.text
    assert sorted(_rows(page.text)) == ["parse-csv", "parse-json"]


def test_a_metadata_filter_keeps_the_tasks_whose_field_holds_the_value(
    server: Server, pair: tuple[str, str]
) -> None:
    with server.http() as http:
        tagged = http.get("/compare", params={"a": pair[0], "b": pair[1], "field": "tags", "value": "io"})
        hard = http.get(
            "/compare", params={"a": pair[0], "b": pair[1], "field": "difficulty", "value": "hard"}
        )
    assert _rows(tagged.text) == ["parse-csv"]
    assert sorted(_rows(hard.text)) == ["fix-build", "parse-json"]
    assert '<option value="difficulty" selected>' in hard.text


def test_grouping_tallies_each_value_and_its_mean_difference(server: Server, pair: tuple[str, str]) -> None:
    with server.http() as http:
        page = http.get("/compare", params={"a": pair[0], "b": pair[1], "group": "category"})
    assert page.status_code == 200, page.text
    groups = {}
    for part in page.text.split('<tr data-group="')[1:]:
        value, row = part.split('"', 1)
        cells = [
            c.split(">", 1)[1].split("<", 1)[0] for c in row.split("</tr>")[0].split('<td class="num')[1:]
        ]
        groups[value] = (cells, row.split("</tr>")[0])
    assert list(groups) == ["code", "data", ""]  # the tasks without the field are a group, last
    assert groups["data"][0] == ["2", "0", "1", "1", "0"]  # parse-csv regressed, parse-json unchanged
    assert "-50.0 pts" in groups["data"][1] and "on 2 tasks" in groups["data"][1]
    assert groups["code"][0] == ["1", "1", "0", "0", "0"] and "+100.0 pts" in groups["code"][1]
    assert "not set" in groups[""][1] and "+0.0 pts" in groups[""][1]


def test_a_field_no_task_sets_is_refused_naming_the_fields(server: Server, pair: tuple[str, str]) -> None:
    with server.http() as http:
        page = http.get("/compare", params={"a": pair[0], "b": pair[1], "group": "categroy"})
    assert page.status_code == 400
    assert "no task sets metadata field &#39;categroy&#39; (fields: category, difficulty, tags)" in page.text


def test_n_runs_are_searched_filtered_and_grouped_like_two(
    server: Server, three: tuple[str, str, str]
) -> None:
    a, b1, b2 = three
    with server.http() as http:
        searched = http.get("/compare", params={"a": a, "b": [b1, b2], "q": "PARSE"})
        hard = http.get("/compare", params={"a": a, "b": [b1, b2], "field": "difficulty", "value": "hard"})
        grouped = http.get("/compare", params={"a": a, "b": [b1, b2], "group": "category"})
        refused = http.get("/compare", params={"a": a, "b": [b1, b2], "group": "categroy"})
    assert searched.status_code == 200, searched.text
    assert sorted(_rows(searched.text)) == ["parse-csv", "parse-json"]
    assert sorted(_rows(hard.text)) == ["fix-build", "parse-json"]
    assert '<input type="hidden" name="b" value="' + b2 + '">' in hard.text  # the form keeps every run
    groups = {}
    for part in grouped.text.split('<tr data-group="')[1:]:
        value, row = part.split('"', 1)
        groups[value] = re.findall(r'<td class="difference">(.*?)</td>', row.split("</tr>")[0], re.S)
    assert list(groups) == ["code", "data", ""]
    # B1: fix-build improved; parse-csv regressed, parse-json unchanged. B2: the other way round.
    assert "+100.0 pts" in groups["code"][0] and "-100.0 pts" not in groups["code"][0]
    assert "+0.0 pts" in groups["code"][1] and "on 1 task" in groups["code"][1]
    assert "-50.0 pts" in groups["data"][0] and "on 2 tasks" in groups["data"][0]
    assert "-50.0 pts" in groups["data"][1] and '<span class="regressed">1↓</span>' in groups["data"][1]
    assert "-100.0 pts" in groups[""][1]
    assert refused.status_code == 400 and "no task sets metadata field" in refused.text


def test_n_runs_rewards_are_overlaid_on_one_axis(server: Server, three: tuple[str, str, str]) -> None:
    a, b1, b2 = three
    with server.http() as http:
        page = http.get("/compare", params={"a": a, "b": [b1, b2]})
    chart = page.text[page.text.index('id="many-distribution-h"') :].split("</figure>")[0]
    bars = re.findall(
        r'class="bar bar-(a|b1|b2)" data-side="[AB12]+" data-count="(\d+)"><title>[^,]+, ([^:]+):', chart
    )
    assert sorted(bars) == [
        ("a", "1", "0%"), ("a", "3", "100%"), ("b1", "1", "0%"), ("b1", "3", "100%"),
        ("b2", "1", "100%"), ("b2", "3", "0%"),
    ]  # fmt: skip
    assert "A: 0% × 1, 100% × 3; B1: 0% × 1, 100% × 3; B2: 0% × 3, 100% × 1" in chart
