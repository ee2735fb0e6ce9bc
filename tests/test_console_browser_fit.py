"""Every console page at 390 px (a phone) and at 1280 px (a laptop), in Debian's chromium through
Playwright against a real `el serve`: no page is wider than the screen, and no table, card, form,
chart or section inside it is wider than its box or reaches past the screen's edge, so nothing is
cut off or needs a sideways scroll. Each page's screenshot is kept (CONSOLE_SCREENSHOTS set to
docs/screenshots writes the docs' copies). The dataset page shows the latest health check beside
each task of the revision.
"""

import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from envloop.services import dataset_checks
from envloop.services.context import open_context
from tests.api_server import Server
from tests.conftest import wait_for
from tests.console_support import Jobs, console_server, twin_job
from tests.test_console_browser import (
    NARROW,
    WIDE,
    Browser,
    Page,
    Shots,
    assert_inert,
    browser,  # noqa: F401 - the module's browser fixture
    expect,
    log_in,
    new_page,
    shots,  # noqa: F401 - the screenshots fixture
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

OVERFLOWS = """() => {
  const screen = document.documentElement.clientWidth;
  const classes = (el) => typeof el.className === 'string' && el.className.trim()
    ? '.' + el.className.trim().split(/\\s+/).join('.') : '';
  const name = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + classes(el);
  const found = [];
  if (document.documentElement.scrollWidth > screen + 1) {
    found.push(`the page is ${document.documentElement.scrollWidth}px wide`);
  }
  const boxes = 'main table, main .scroll, main section, main figure, main form, main dl, main pre, ' +
    'main details, main .side, main .job-head, main tr, header nav';
  for (const el of document.querySelectorAll(boxes)) {
    const box = el.getBoundingClientRect();
    if (box.width === 0 && box.height === 0) continue;  // not shown (a closed details' body)
    if (box.left < -1 || box.right > screen + 1) {
      found.push(`${name(el)} reaches ${Math.round(box.left)}..${Math.round(box.right)}px`);
    }
    if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== 'visible') {
      found.push(`${name(el)} holds ${el.scrollWidth}px in ${el.clientWidth}px`);
    }
  }
  return found;
}"""


@dataclass(frozen=True)
class Console:
    server: Server
    jobs: Jobs
    twin: str
    check: str
    share: str


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    """The seed job and the agent job, a second run of the seed dataset to compare with, a health
    check of the seed dataset (its oracle has no solution: every task fails it), both jobs on the
    leaderboard, and a share link of the seed job."""
    root = tmp_path_factory.mktemp("console-fit")
    with console_server(root) as (server, jobs):
        twin = twin_job(server, root)
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("ENVLOOP_HOME", str(server.el.home))
            ctx = open_context(server.el.home)
            try:
                check = dataset_checks.check_dataset(ctx, "seed@1", attempts=1, environment="local").job.id
                wait_for(lambda: dataset_checks.dataset_check(ctx, check).finished, timeout=300)
            finally:
                ctx.close()
        with server.http() as http:
            for job in (jobs.agent, jobs.seed):
                assert http.post("/v1/leaderboard", json={"job_id": job}).status_code == 200
            share = http.post(f"/v1/jobs/{jobs.seed}/shares", json={}).json()["path"]
        yield Console(server, jobs, twin, check, server.url + share)


def pages(c: Console) -> dict[str, str]:
    seed, agent, trial = c.jobs.seed, c.jobs.agent, c.jobs.agent_trial
    return {
        "jobs": "/",
        "job": f"/jobs/{seed}",
        "job-breakdown": f"/jobs/{seed}?by=category",
        "job-check": f"/jobs/{c.check}",
        "grid": f"/jobs/{seed}/grid",
        "samples": f"/jobs/{seed}/samples",
        "samples-agent": f"/jobs/{agent}/samples",
        "trial-overview": f"/trials/{trial}",
        "trial-metrics": f"/trials/{trial}/metrics",
        "trial-logs": f"/trials/{trial}/logs",
        "trial-artifacts": f"/trials/{trial}/artifacts",
        "trace": f"/trials/{trial}/trace?step=4",
        "transcript": f"/trials/{trial}/trace?view=transcript",
        "leaderboard": "/leaderboard",
        "compare": f"/compare?a={seed}&b={c.twin}",
        "compare-why": f"/compare?a={seed}&b={c.twin}&show=regressed",
        "compare-grouped": f"/compare?a={seed}&b={c.twin}&group=category",
        "compare-many": f"/compare?a={seed}&b={c.twin}&b={agent}",
        "compare-many-grouped": f"/compare?a={seed}&b={c.twin}&b={agent}&group=tags",
        "dataset": "/datasets/seed@1",
        "dataset-unchecked": "/datasets/agentic@1",
        "not-found": "/jobs/job_nope",
    }


def overflows(page: Page) -> list[str]:
    return list(page.evaluate(OVERFLOWS))


@pytest.mark.parametrize("viewport", [WIDE, NARROW], ids=["1280px", "390px"])
def test_every_page_fits_the_screen_with_nothing_cut_off(
    console: Console,
    browser: Browser,  # noqa: F811
    shots: Shots,  # noqa: F811
    viewport: dict[str, int],
) -> None:
    width = viewport["width"]
    page = new_page(browser, viewport)
    page.goto(console.server.url + "/")
    expect(page).to_have_url(re.compile(r"/login\?next="))
    problems = {"login": found} if (found := overflows(page)) else {}
    shots(page, f"login-{width}", full_page=False)
    log_in(page, console.server)
    for name, path in pages(console).items():
        page.goto(console.server.url + path)
        page.wait_for_load_state("networkidle")
        if name == "compare-why":
            page.locator("details.why").first.evaluate("el => el.open = true")
        found = overflows(page)
        if found:
            problems[name] = found
        assert page.locator("h1").count() == 1, name
        assert_inert(page)
        shots(page, f"{name}-{width}", full_page=False)
    stranger = new_page(browser, viewport)
    stranger.goto(console.share)
    expect(stranger.get_by_text("Shared job · read-only")).to_be_visible()
    if found := overflows(stranger):
        problems["shared-job"] = found
    shots(stranger, f"shared-job-{width}", full_page=False)
    assert problems == {}, "\n".join(f"{name}: {'; '.join(found[:4])}" for name, found in problems.items())


def test_the_overflow_check_fails_a_page_that_is_cut(
    console: Console,
    browser: Browser,  # noqa: F811
) -> None:
    """The check itself: a table made wider than a phone is reported, as is a box it pushes past
    the screen's edge."""
    page = new_page(browser, NARROW)
    log_in(page, console.server, "/datasets/seed@1")
    assert overflows(page) == []
    page.evaluate("document.querySelector('table.dataset-tasks tbody th').style.minWidth = '900px'")
    found = overflows(page)
    assert any("holds" in line and "scroll" in line for line in found), found
    page.evaluate("document.querySelector('main section').style.width = '900px'")
    assert any("reaches" in line for line in overflows(page))


def test_the_dataset_page_shows_the_latest_check_beside_each_task(
    console: Console,
    browser: Browser,  # noqa: F811
    shots: Shots,  # noqa: F811
) -> None:
    page = new_page(browser, WIDE)
    log_in(page, console.server, f"/jobs/{console.jobs.seed}")
    page.get_by_role("link", name="seed@1", exact=True).click()
    expect(page).to_have_url(re.compile(r"/datasets/seed%401$|/datasets/seed@1$"))
    expect(page.locator("h1")).to_have_text("Dataset seed@1")
    expect(page.locator("#health-summary")).to_contain_text("0 of 3 tasks of seed@1 healthy")
    rows = page.locator("table.dataset-tasks tbody tr")
    expect(rows).to_have_count(3)
    with console.server.http() as http:
        verdicts = {t["task"]: t for t in http.get(f"/v1/dataset-checks/{console.check}").json()["tasks"]}
    for task, verdict in verdicts.items():
        row = page.locator(f'tr[data-task="{task}"]')
        expect(row.locator("td.verdict")).to_have_text("; ".join(verdict["problems"]))
    assert_inert(page)  # C's hostile category and reward file stay text
    page.locator("#health-summary").get_by_role("link", name=console.check).click()
    expect(page.locator("#health-h")).to_have_text("Dataset health")
    page.goto(console.server.url + "/datasets/agentic@1")
    expect(page.locator("#health-summary")).to_contain_text("Never checked: el dataset check agentic@1")
    expect(page.locator("table.dataset-tasks tbody tr")).to_have_count(1)
