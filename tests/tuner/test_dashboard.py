"""The dashboard in a real headless Chromium (driven by Playwright) against a real
server, database and local workers: the jobs page lists a submitted job, a running
job's chart grows without a reload, the workload page shows the best trace and its
loop nest, cancel from the page cancels, a bad job id says so; the browser console
stays free of errors. Each test writes a screenshot of its page to SCREENSHOTS."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from onnx_models import mlp
from playwright.sync_api import Browser, Page, sync_playwright
from service_server import serving

from db import JobStatus, SQLDatabase
from tuner.service import create_app
from tuner.service.coordinator import Coordinator
from workers import Workers

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SCREENSHOTS = Path(__file__).resolve().parents[2] / "build" / "dashboard"
RELU = {"op": "relu", "args": {"shape": [48, 32]}}
MATMUL = {"op": "matmul", "args": {"m": 32, "n": 32, "k": 32}}
# A task with more distinct programs than a job's trials (the relu's space makes 8).
SMALL_MATMUL = {"op": "matmul", "args": {"m": 16, "n": 16, "k": 16}}
WAIT_MS = 60_000

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium: install it with bash scripts/install_system_deps.sh"
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


class Console:
    """The errors a page logged: console errors and uncaught exceptions."""

    def __init__(self, page: Page) -> None:
        self.errors: list[str] = []
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda err: self.errors.append(str(err)))


@pytest.fixture
def page(browser: Browser, admin: str) -> Iterator[Page]:
    """A page of a fresh browser context that holds the admin token."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.add_init_script(f"localStorage.setItem('tensortune.token', '{admin}')")
    opened = context.new_page()
    opened.set_default_timeout(WAIT_MS)
    yield opened
    context.close()


@pytest.fixture
def coordinated(database: SQLDatabase, backend: Workers) -> Iterator[str]:
    """The service with a coordinator that runs what is submitted; its URL."""
    coordinator = Coordinator(database, backend)
    wake = threading.Event()
    running = threading.Thread(target=coordinator.run_until_stopped, args=(wake, 3600.0))
    running.start()
    try:
        with serving(create_app(database, submitted=wake.set)) as url:
            yield url
    finally:
        coordinator.stopping.set()
        wake.set()
        running.join()


def submit(url: str, admin: str, body: dict) -> dict:
    answer = httpx.post(f"{url}/v1/jobs", json=body, headers={"Authorization": f"Bearer {admin}"})
    assert answer.status_code == 201, answer.text
    return answer.json()


def screenshot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def test_the_jobs_page_lists_a_job_submitted_over_the_api(server, admin, page) -> None:
    console = Console(page)
    job = submit(server, admin, {"workloads": [RELU, MATMUL], "trials": 8})
    page.goto(f"{server}/")
    row = page.locator(f"tr[data-job='{job['id']}']")
    row.wait_for()
    assert "queued" in row.inner_text() and "relu" in row.inner_text()
    assert "0 / 16" in row.inner_text()
    screenshot(page, "jobs")
    page.select_option("select[aria-label=state]", "done")
    page.wait_for_url("**#/jobs?status=done")
    page.get_by_text("No done jobs.").wait_for()
    assert console.errors == []


def test_a_running_jobs_chart_grows_without_a_reload(coordinated, admin, page) -> None:
    console = Console(page)
    job = submit(
        coordinated, admin, {"workloads": [SMALL_MATMUL, MATMUL], "trials": 24, "tuner": "random"}
    )
    page.goto(f"{coordinated}/ui/#/jobs/{job['id']}")
    page.evaluate("window.loadedOnce = true")
    charts = page.locator("[data-chart=rate]")
    charts.first.wait_for()
    seen: list[int] = []
    deadline = time.monotonic() + WAIT_MS / 1000
    while page.locator("h1 .state.done").count() == 0:
        assert time.monotonic() < deadline, f"the job did not end; the points counted: {seen}"
        seen.append(int(charts.first.get_attribute("data-points") or 0))
        time.sleep(0.05)
    page.wait_for_timeout(500)  # the trials of the last update
    measured = httpx.get(
        f"{coordinated}/v1/jobs/{job['id']}", headers={"Authorization": f"Bearer {admin}"}
    ).json()["tasks"][0]["measured"]
    final = int(charts.first.get_attribute("data-points") or 0)
    grown = sorted(set(seen) - {0})
    assert len(grown) >= 2 and final == measured > grown[0], f"the points counted: {grown}"
    assert page.evaluate("window.loadedOnce") is True  # the same page, never reloaded
    assert page.locator(".share").count() == 1  # two tasks: the budget of each
    screenshot(page, "job")
    page.click("[data-axis=time]")
    page.wait_for_url("**x=time")
    charts.first.wait_for()
    assert console.errors == []


def test_the_workload_page_shows_the_best_trace_and_its_loop_nest(
    coordinated, admin, page, database
) -> None:
    console = Console(page)
    job = submit(coordinated, admin, {"workloads": [MATMUL], "trials": 6, "tuner": "random"})
    deadline = time.monotonic() + WAIT_MS / 1000
    while database.job(job["id"]).status is not JobStatus.DONE:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    key = database.job(job["id"]).tasks[0].workload_key
    page.goto(f"{coordinated}/ui/#/workloads/{key}")
    page.locator("#trace").wait_for()
    assert "sch.get_block" in page.inner_text("#trace")
    page.wait_for_function("!document.querySelector('#loop-nest').textContent.includes('lowering')")
    assert "for " in page.inner_text("#loop-nest")
    assert "GFLOP/s" in page.inner_text("#best")
    screenshot(page, "workload")
    assert console.errors == []


def test_a_model_jobs_tasks_are_shown_each_with_its_share(
    coordinated, admin, page, database, rng
) -> None:
    console = Console(page)
    stored = database.commit_model_file("mlp", mlp(rng).SerializeToString(), {})[0]
    job = submit(coordinated, admin, {"model": stored.id, "trials": 12, "tuner": "random"})
    deadline = time.monotonic() + WAIT_MS / 1000
    while database.job(job["id"]).status is not JobStatus.DONE:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    page.goto(f"{coordinated}/ui/#/jobs")
    page.locator(f"tr[data-job='{job['id']}']").wait_for()
    assert f"model {stored.id}" in page.inner_text(f"tr[data-job='{job['id']}']")
    page.goto(f"{coordinated}/ui/#/jobs/{job['id']}")
    page.locator("[data-task]").first.wait_for()
    titles = page.locator("[data-task] h2").all_inner_texts()
    assert len(titles) == len(job["tasks"]) >= 2
    assert all(title.startswith(f"model {stored.id}, task ") for title in titles)
    assert "12 / 12" in page.inner_text("body")
    screenshot(page, "model-job")
    assert console.errors == []


def test_cancel_from_the_page_cancels_the_job(server, admin, page, database) -> None:
    console = Console(page)
    job = submit(server, admin, {"workloads": [RELU], "trials": 8})
    page.goto(f"{server}/ui/#/jobs")
    page.click(f"button[data-cancel='{job['id']}']")
    page.locator(f"tr[data-job='{job['id']}'] .state.cancelled").wait_for()
    assert database.job(job["id"]).status is JobStatus.CANCELLED
    assert console.errors == []


def test_a_bad_job_id_shows_a_clear_message(server, page) -> None:
    console = Console(page)
    page.goto(f"{server}/ui/#/jobs/99999")
    alert = page.get_by_role("alert")
    alert.wait_for()
    assert "There is no job 99999 in this service." in alert.inner_text()
    screenshot(page, "missing-job")
    # the browser itself logs the 404 of the lookup; nothing else may be logged
    assert [e for e in console.errors if "404" not in e] == []


def test_without_a_token_the_page_says_how_to_get_one(server, browser) -> None:
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{server}/ui/#/jobs")
    alert = page.get_by_role("alert")
    alert.wait_for(timeout=WAIT_MS)
    assert "needs an API token" in alert.inner_text()
    assert "tensortune token create" in alert.inner_text()
    context.close()
