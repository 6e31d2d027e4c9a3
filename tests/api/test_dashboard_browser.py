"""The dashboard in a real headless Chromium (Debian's package), driven by Playwright.

A missing browser is a failure, never a skip: ``.ci/run`` installs ``chromium``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright
from sqlalchemy import Connection, Engine

from rota.api.failed_counts import FailedCounts
from rota.core.queries.jobs_gauges import StateCount, failed_by_type
from rota.core.queries.jobs_outcome import Finish, finish_if_lease_held
from rota.core.states import AttemptOutcome, JobState
from tests.support.api_support import ManualClock, fail, failed_jobs_of_a_type, running_api
from tests.support.executor_support import (
    add_jobs,
    claim_as,
    job_row,
    job_type,
    store_types,
    wait_for,
)

CHROMIUM = os.environ.get("ROTA_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
HOSTILE_DETAIL = '<img src=x onerror="window.__xss = 1">\n</pre><script>window.__xss = 2</script>'
HOSTILE_ARGS = {"note": "<script>window.__xss = 3</script>", "<b>key</b>": "\u202e\u0000"[:1]}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not os.path.exists(CHROMIUM):
        pytest.fail(
            f"no Chromium at {CHROMIUM}: install Debian's package (apt-get install -y "
            "chromium; .ci/run does) or set ROTA_TEST_CHROMIUM. Browser tests never skip."
        )
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    p = context.new_page()
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    yield p
    context.close()
    assert errors == [], errors


def failed_job(engine: Engine, client: httpx.Client) -> str:
    """A job that really failed: claimed and reported FAILED with a hostile error detail."""
    submitted = client.post("/jobs", json={"job_type": "t", "args": HOSTILE_ARGS})
    job_id: str = submitted.json()["job_id"]
    (claimed,) = claim_as(engine, "worker-1", 1)
    assert str(claimed.job_id) == job_id
    f = Finish(
        claimed.job_id,
        claimed.lease_generation,
        JobState.FAILED,
        AttemptOutcome.FAILED,
        "PAYMENT_DECLINED",
        HOSTILE_DETAIL,
    )
    with engine.begin() as conn:
        finish_if_lease_held(conn, owner="worker-1", finishes=[f])
    return job_id


def test_the_page_shows_jobs_and_replays_a_failed_one(engine: Engine, page: Page) -> None:
    store_types(engine, job_type("t"))
    with running_api(engine) as base, httpx.Client(base_url=base) as client:
        failed = failed_job(engine, client)
        page.goto(base + "/")
        expect(page).to_have_title("rota")
        expect(page.locator("#queues h2")).to_have_text("Queues")
        expect(page.locator("#failed")).to_contain_text("PAYMENT_DECLINED")
        # Hostile values are shown as text, never run or parsed.
        detail = page.locator("#failed pre.detail")
        expect(detail).to_contain_text('<img src=x onerror="window.__xss')
        assert page.evaluate("window.__xss") is None
        assert page.locator("#failed img").count() == 0

        # A job submitted through the API appears by itself (the page refreshes).
        submitted = client.post("/jobs", json={"job_type": "t"}).json()["job_id"]
        expect(page.locator("#recent")).to_contain_text(submitted, timeout=15_000)
        expect(page.locator("#queues")).to_contain_text("t")

        # The replay button asks for a reason, then moves the FAILED job back to QUEUED.
        row = page.locator("#failed tr", has_text=failed)
        page.once("dialog", lambda dialog: dialog.accept("fixed <b>upstream</b>"))
        row.get_by_role("button", name="replay").click()
        wait_for(
            lambda: job_row(engine, uuid.UUID(failed))["state"] == "QUEUED",
            timeout=10,
            what="the replay",
        )
        expect(page.locator("#notice")).to_contain_text("now QUEUED")
        expect(page.locator("#failed")).not_to_contain_text(failed, timeout=15_000)

        # The job page: fields, the attempts as a timeline, hostile args as text.
        page.goto(f"{base}/#/jobs/{failed}")
        expect(page.locator("#job h2")).to_contain_text(failed)
        expect(page.locator("#job")).to_contain_text("<script>window.__xss = 3</script>")
        expect(page.locator("#job svg rect")).to_have_count(1)
        expect(page.locator("#job")).to_contain_text("#1 FAILED PAYMENT_DECLINED")
        expect(page.locator("#job dl")).to_contain_text("t (pool default, priority 0)")
        expect(page.locator("#job-actions")).to_contain_text("replay")
        expect(page.locator("#job-actions")).to_contain_text("anonymous")
        expect(page.locator("#job-actions")).to_contain_text("fixed <b>upstream</b>")
        expect(page.locator("#job")).not_to_contain_text("[object")
        assert page.evaluate("window.__xss") is None


def test_the_page_says_how_old_a_kept_failed_count_is(engine: Engine, page: Page) -> None:
    spec = failed_jobs_of_a_type(engine, 3)
    clock = ManualClock()

    def count_taking_a_second(conn: Connection) -> list[StateCount]:
        clock.now += 1.0
        return failed_by_type(conn)

    # Past the cap (1 here), a count that took 1 s is kept for 1,000 s.
    counts = FailedCounts(
        clock=clock, exact_up_to=1, cost_factor=1000.0, count=count_taking_a_second
    )
    with engine.connect() as conn:
        assert counts.read(conn).age_seconds == 0.0
    fail(engine, add_jobs(engine, spec, 2))  # 5 FAILED now; the kept count says 3
    clock.now += 41.0
    with running_api(engine, failed_counts=counts) as base:
        page.goto(base + "/")
        expect(page.locator("#queues td.num.bad")).to_have_text("3")
        expect(page.locator("#failed-count-age")).to_have_text("#failed counted 42 s ago")


def test_a_fresh_failed_count_shows_no_age(engine: Engine, page: Page) -> None:
    failed_jobs_of_a_type(engine, 3)
    with running_api(engine) as base:
        page.goto(base + "/")
        expect(page.locator("#queues td.num.bad")).to_have_text("3")
        expect(page.locator("#failed-count-age")).to_have_count(0)


def test_a_schedule_page_shows_its_skip_ledger_and_pause_works(engine: Engine, page: Page) -> None:
    from rota.core.queries.jobs_read import database_now
    from rota.core.queries.schedule_skips import SkipRecord, record_skips
    from rota.core.states import SkipReason
    from rota.scheduler.apply import apply_schedule_file
    from rota.scheduler.schedule_file.loader import load_schedule_text

    text = (
        "job_types:\n  t: {handler: 'm:f'}\n"
        "schedules:\n  '<i>nightly</i>': {job_type: t, cron: '0 2 * * *'}\n"
    )
    apply_schedule_file(engine, load_schedule_text(text, "s.yaml"))
    with engine.begin() as conn:
        now = database_now(conn)
        record_skips(conn, [SkipRecord("<i>nightly</i>", SkipReason.MISFIRE, now, now, 4)])
    with running_api(engine) as base, httpx.Client(base_url=base) as client:
        page.goto(base + "/#/schedules")
        row = page.locator("#schedules tr", has_text="<i>nightly</i>")
        expect(row).to_contain_text("misfire 4")
        page.once("dialog", lambda dialog: dialog.dismiss())  # no reason: no action
        row.get_by_role("button", name="pause").click()
        expect(page.locator("#notice")).to_contain_text("pause <i>nightly</i> not sent")
        assert client.get("/schedules/%3Ci%3Enightly%3C%2Fi%3E").json()["paused"] is False
        page.once("dialog", lambda dialog: dialog.accept("maintenance"))
        row.get_by_role("button", name="pause").click()
        expect(page.locator("#notice")).to_contain_text("pause <i>nightly</i> done")
        assert client.get("/schedules/%3Ci%3Enightly%3C%2Fi%3E").json()["paused"] is True
        row.get_by_role("link", name="<i>nightly</i>").click()
        expect(page.locator("#schedule h2")).to_have_text("Schedule <i>nightly</i>")
        expect(page.locator("#schedule")).to_contain_text("paused since")
        expect(page.locator("#schedule table").first).to_contain_text("misfire")
        expect(page.locator("#schedule-actions")).to_contain_text("pause")
        expect(page.locator("#schedule-actions")).to_contain_text("maintenance")
        assert page.locator("#schedule i").count() == 0


def test_the_page_asks_for_the_token_and_then_works(engine: Engine, page: Page) -> None:
    store_types(engine, job_type("t"))
    with running_api(engine, token="let-me-in") as base:
        response = page.goto(base + "/")
        assert response is not None and response.status == 401
        expect(page.locator("#login")).to_be_visible()
        page.fill("#token", "wrong")
        page.click("#login button")
        expect(page.locator("#status")).to_contain_text("token", timeout=10_000)
        expect(page.locator("#login")).to_be_visible()
        page.fill("#token", "let-me-in")
        page.click("#login button")
        expect(page.locator("#queues h2")).to_have_text("Queues", timeout=10_000)
        expect(page.locator("#login")).to_be_hidden()


def test_the_page_has_no_outside_assets(engine: Engine, page: Page) -> None:
    store_types(engine, job_type("t"))
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    with running_api(engine) as base:
        response = page.goto(base + "/")
        assert response is not None
        csp = response.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "'unsafe-inline'" not in csp
        expect(page.locator("#queues h2")).to_have_text("Queues")
    assert requested and all(url.startswith(base) for url in requested), requested
