"""Deciding between runs in a real browser (Debian's chromium through Playwright, against a real
`el serve`): two jobs ticked in the jobs list open their comparison; a job's Samples are searched,
filtered, sorted and paged; the job page breaks scores down by task metadata; the trace viewer
answers keys from page load, searches every step and shows the whole transcript. Every page is
checked at 1280 and 390 px, with no console error and no failed request."""

import re
from collections.abc import Iterator

import pytest

from tests.api_server import Server
from tests.console_support import HOSTILE, Jobs, console_server, twin_job
from tests.test_console_browser import (
    NARROW,
    WIDE,
    Browser,
    Page,
    Shots,
    assert_fits,
    assert_inert,
    browser,  # noqa: F401 - the module's browser fixture
    expect,
    log_in,
    new_page,
    shots,  # noqa: F401 - the screenshots fixture
    steps_of,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]
Request = pytest.importorskip("playwright.sync_api").Request
Response = pytest.importorskip("playwright.sync_api").Response


class Watched:
    """What went wrong on a page while a test used it: console errors, failed requests, and
    answers of 500 or more (a 4xx the test asks for on purpose is its own business). A request the
    page's script still had open when the page was left (a live feed, `…/events`, or a section it
    was still loading, such as the job's tool usage) is reported as aborted: that is not a failure."""

    def __init__(self, page: Page) -> None:
        self.problems: list[str] = []
        page.on("console", lambda m: self.problems.append(f"console {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda error: self.problems.append(f"page error {error}"))
        page.on("requestfailed", self._failed)
        page.on("response", self._answered)

    def _failed(self, request: Request) -> None:
        left = request.failure == "net::ERR_ABORTED" and request.resource_type in ("fetch", "eventsource")
        if not left:
            self.problems.append(f"failed {request.url} {request.failure}")

    def _answered(self, response: Response) -> None:
        if response.status >= 500:
            self.problems.append(f"{response.status} {response.url}")


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Jobs, str]]:
    """The seed job (A) and a second job on its dataset whose agent always writes attempt 2 (B):
    task A regresses from 50% to 0%, B stays at 100%, C is scored only by A."""
    root = tmp_path_factory.mktemp("console-runs")
    with console_server(root) as (server, jobs):
        yield server, jobs, twin_job(server, root)


@pytest.fixture
def watched(browser: Browser) -> Iterator[tuple[Page, Watched]]:  # noqa: F811
    page = new_page(browser)
    watch = Watched(page)
    yield page, watch
    assert watch.problems == []


def test_two_jobs_ticked_in_the_jobs_list_open_their_comparison(
    running: tuple[Server, Jobs, str],
    watched: tuple[Page, Watched],
    shots: Shots,  # noqa: F811
) -> None:
    server, jobs, twin = running
    page, _ = watched
    log_in(page, server)
    compare = page.get_by_role("button", name="Compare the selected jobs")
    expect(compare).to_be_disabled()
    page.get_by_label(f"Select {jobs.seed} to compare").check()
    page.get_by_label("Select twin run to compare").check()
    expect(compare).to_be_enabled()
    compare.click()
    expect(page).to_have_url(re.compile(rf"/compare\?a={jobs.seed}&b={twin}$"))
    expect(page.locator(".tally")).to_have_text(
        re.compile(r"0 improved · 1 regressed · 1 unchanged · 1 not compared")
    )
    with server.http() as http:
        api = http.get("/v1/compare", params={"job_a": jobs.seed, "job_b": twin}).json()
    assert (api["improved"], api["regressed"], api["unchanged"]) == (0, 1, 1)
    expect(page.locator(".difference-line")).to_contain_text("B − A -25.0 pts")
    rows = page.locator("table.compare tbody tr[data-task]")
    expect(rows).to_have_count(3)
    expect(rows.filter(has_text="only A scored it")).to_have_count(1)
    shots(page, "compare")

    page.get_by_label("Show").select_option("regressed")
    page.get_by_role("button", name="Apply").click()
    expect(rows).to_have_count(1)
    expect(rows.first.locator("th")).to_have_text("A")
    why = page.locator('tr[data-why="A"] details.why')
    expect(why).to_have_attribute("open", "")  # a regression, listed as such, opens with its reasons
    expect(why.locator("section.side")).to_have_count(2)  # A and B side by side
    expect(why.locator('li[data-side="B"]').first.get_by_role("link", name="trace")).to_have_attribute(
        "href", re.compile(r"/trials/trl_[0-9a-z]+/trace$")
    )
    shots(page, "compare-why")
    rows.first.locator("a.cell").first.click()
    expect(page).to_have_url(re.compile(r"/trials/trl_"))
    page.go_back()
    page.get_by_role("link", name="Swap A and B").click()
    expect(page.locator(".tally")).to_have_text(re.compile(r"1 improved · 0 regressed"))
    expect(page.locator("rect.bar-a").first).to_be_visible()  # both distributions, overlaid
    expect(page.locator("rect.bar-b").first).to_be_visible()
    page.get_by_label("Task name").fill("a")
    page.get_by_label("Group by").select_option("category")
    page.get_by_role("button", name="Apply").click()
    expect(rows).to_have_count(1)
    groups = page.locator("table.compare-groups tbody tr")
    expect(groups).to_have_count(1)
    expect(groups.first).to_contain_text("files")
    expect(groups.first.locator("td.difference")).to_contain_text("+50.0 pts on 1 task")  # as its one row
    expect(rows.first.locator("td.difference")).to_have_text("+50.0 pts")
    shots(page, "compare-grouped")


def test_the_job_page_leads_to_comparable_runs_and_breaks_scores_down(
    running: tuple[Server, Jobs, str], watched: tuple[Page, Watched]
) -> None:
    server, jobs, twin = running
    page, _ = watched
    log_in(page, server, f"/jobs/{jobs.seed}")
    section = page.locator("#breakdown")
    groups = section.locator("table.breakdown tbody tr")
    expect(groups).to_have_count(2)  # category: files (A, B) and a hostile name (C), shown as text
    files = groups.filter(has=page.locator("th", has_text="files"))
    expect(files).to_contain_text("score 75%, 4/4 attempts scored, 2/2 members complete")
    expect(groups.filter(has_text=HOSTILE)).to_contain_text("score 0%, 1/2 attempts scored")
    section.get_by_label("Group tasks by").select_option("tags")
    section.get_by_role("button", name="Show").click()
    expect(page.locator("#breakdown table.breakdown tbody tr")).to_have_count(3)
    expect(page.locator("#breakdown")).to_contain_text("a list for some tasks")
    assert_inert(page)
    page.get_by_label("Job B").select_option(twin)
    page.get_by_role("button", name="Compare", exact=True).click()
    expect(page.locator(".tally")).to_contain_text("1 regressed")
    with server.http() as http:
        refused = http.get("/compare", params={"a": jobs.seed, "b": jobs.agent})
    assert refused.status_code == 400 and "different dataset revisions" in refused.text


def test_samples_are_searched_filtered_sorted_and_paged(
    running: tuple[Server, Jobs, str],
    watched: tuple[Page, Watched],
    shots: Shots,  # noqa: F811
) -> None:
    server, jobs, _ = running
    page, _ = watched
    log_in(page, server, f"/jobs/{jobs.seed}")
    page.get_by_role("link", name="Samples").click()
    expect(page).to_have_url(re.compile(f"/jobs/{jobs.seed}/samples$"))
    rows = page.locator("table.samples tbody tr")
    expect(rows).to_have_count(6)
    expect(rows.first).to_contain_text("Do the A thing.")
    expect(rows.first).to_contain_text("attempt 1 of A")  # the agent's output
    assert_inert(page)
    shots(page, "samples")
    page.get_by_label("Search").fill("attempt 2 of")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"q=attempt\+2\+of"))
    expect(rows).to_have_count(3)
    page.get_by_label("Reward").select_option("counted")
    page.get_by_label("Sort by").select_option("-reward")
    page.get_by_role("button", name="Apply").click()
    expect(rows).to_have_count(2)
    expect(page.locator(".sample-count")).to_have_text(re.compile(r"^2 samples match this query"))
    page.goto(f"{server.url}/jobs/{jobs.seed}/samples?limit=4")
    page.get_by_role("link", name="Next →").click()
    expect(rows).to_have_count(2)
    with server.http() as http:
        bearer = http.get(f"/jobs/{jobs.seed}/samples", params={"q": "attempt 1 of"})
    assert bearer.status_code == 200 and "3 samples match this query" in re.sub(
        r"<[^>]+>|\s+", " ", bearer.text
    )


def test_the_trace_answers_keys_from_page_load_searches_and_shows_the_whole_transcript(
    running: tuple[Server, Jobs, str],
    watched: tuple[Page, Watched],
    shots: Shots,  # noqa: F811
) -> None:
    server, jobs, _ = running
    page, _ = watched
    total = len(steps_of(server, jobs.agent_trial))
    log_in(page, server, f"/trials/{jobs.agent_trial}/trace")
    detail = page.locator("#step-detail")
    expect(detail).to_contain_text("Step 1 · system")
    page.keyboard.press("ArrowDown")  # nothing focused first
    expect(detail).to_contain_text("Step 2 · user")
    page.keyboard.press("j")
    expect(detail).to_contain_text("Step 3 · model")
    page.keyboard.press("End")
    expect(detail).to_contain_text(f"Step {total} ·")

    page.keyboard.press("/")
    expect(page.get_by_label("Search this trace")).to_be_focused()
    page.keyboard.type("seq 1 30000")
    page.keyboard.press("Enter")
    expect(page.locator("#trace-hits")).to_have_text(re.compile(r"match 1 of 2 steps"))
    expect(detail.locator("mark.hit").first).to_have_text("seq 1 30000")
    page.keyboard.press("Escape")
    page.keyboard.press("n")
    expect(page.locator("#trace-hits")).to_have_text(re.compile(r"match 2 of 2 steps"))
    expect(page.locator("ol.timeline li.match")).to_have_count(2)

    page.get_by_role("button", name="Whole transcript").click()
    transcript = page.get_by_label("Whole transcript", exact=True)
    expect(transcript.locator("article.step")).to_have_count(total)
    expect(page).to_have_url(re.compile(r"view=transcript"))
    shots(page, "transcript")
    page.reload()
    expect(page.get_by_label("Whole transcript", exact=True).locator("article.step")).to_have_count(total)
    page.keyboard.press("t")
    expect(page.locator("#step-detail")).to_be_visible()


@pytest.mark.parametrize("viewport", [WIDE, NARROW], ids=["1280px", "390px"])
def test_the_new_pages_fit_the_screen_and_label_their_controls(
    running: tuple[Server, Jobs, str],
    browser: Browser,  # noqa: F811
    shots: Shots,  # noqa: F811
    viewport: dict[str, int],
) -> None:
    server, jobs, twin = running
    page = new_page(browser, viewport)
    watch = Watched(page)
    log_in(page, server)
    paths = {
        "compare": f"/compare?a={jobs.seed}&b={twin}",
        "compare-grouped": f"/compare?a={jobs.seed}&b={twin}&group=category&q=a",
        "compare-many": f"/compare?a={jobs.seed}&b={twin}&b={jobs.agent}",
        "samples": f"/jobs/{jobs.seed}/samples",
        "samples-agent": f"/jobs/{jobs.agent}/samples",
        "job-breakdown": f"/jobs/{jobs.seed}?by=category",
        "transcript": f"/trials/{jobs.agent_trial}/trace?view=transcript",
    }
    assert_fits(page, server, paths, viewport["width"], shots)
    assert watch.problems == []
