"""The dashboard in a real headless Chromium (Debian's package), driven by Playwright.

A missing browser is a failure, never a skip: ``.ci/run`` installs ``chromium``
(``tests/api/conftest.py`` launches it, once per worker).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import httpx
import pytest
from playwright.sync_api import Browser, Dialog, Page, expect
from sqlalchemy import Connection, Engine, func, insert, select

from rota.api.failed_counts import FailedCounts
from rota.core.queries.jobs_gauges import StateCount, failed_by_type
from rota.core.queries.jobs_outcome import Finish, finish_if_lease_held
from rota.core.states import AttemptOutcome, JobState
from rota.core.tables import job_attempt_output, job_attempts
from tests.support import loopback
from tests.support.api_support import ManualClock, fail, failed_jobs_of_a_type, running_api
from tests.support.executor_support import (
    add_jobs,
    claim_as,
    job_row,
    job_type,
    renew_as,
    states,
    store_types,
    wait_for,
)

HOSTILE_DETAIL = '<img src=x onerror="window.__xss = 1">\n</pre><script>window.__xss = 2</script>'
HOSTILE_ARGS = {"note": "<script>window.__xss = 3</script>", "<b>key</b>": "\u202e\u0000"[:1]}


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
    with running_api(engine) as base, loopback.Client(base_url=base) as client:
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
    with running_api(engine) as base, loopback.Client(base_url=base) as client:
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
        expect(page.locator("#schedule .pause-reason")).to_contain_text("since ")
        expect(page.locator("#schedule .pause-reason")).to_contain_text("by anonymous: maintenance")
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


# -- the dashboard as a workplace: addressable views, bulk actions, runs, schedules --------


def finish_claimed(engine: Engine, n: int, state: JobState, code: str | None, detail: str) -> None:
    """Claim ``n`` jobs as worker-1 and end each attempt in ``state`` (real statements)."""
    claimed = claim_as(engine, "worker-1", n)
    assert len(claimed) == n
    outcome = AttemptOutcome.SUCCEEDED if state is JobState.SUCCEEDED else AttemptOutcome.FAILED
    finishes = [Finish(c.job_id, c.lease_generation, state, outcome, code, detail) for c in claimed]
    with engine.begin() as conn:
        finish_if_lease_held(conn, owner="worker-1", finishes=finishes)


def keyed_jobs(engine: Engine, n: int) -> list[uuid.UUID]:
    """``n`` QUEUED jobs of type ``t`` with dedup keys key-000, key-001, ..."""
    from rota.core.queries.jobs_insert import NewJob, insert_jobs_or_skip

    new = [NewJob.of_type(job_type("t"), dedup_key=f"key-{i:03}") for i in range(n)]
    with engine.begin() as conn:
        insert_jobs_or_skip(conn, new)
    return [j.job_id for j in new]


def rows_of(page: Page) -> list[str]:
    return page.locator("#jobs tbody tr td:first-child").all_inner_texts()


def test_the_jobs_view_is_addressable_searches_and_pages(engine: Engine, page: Page) -> None:
    store_types(engine, job_type("t"), job_type("other"))
    add_jobs(engine, job_type("t"), 2)
    finish_claimed(engine, 2, JobState.FAILED, "PAYMENT_DECLINED", HOSTILE_DETAIL)
    keyed = keyed_jobs(engine, 55)
    with running_api(engine) as base:
        # A shared link opens the same filtered view, its filters in the form.
        page.goto(base + "/#/jobs?state=FAILED&job_type=t")
        expect(page.locator("#jobs tbody tr")).to_have_count(2)
        expect(page.locator("#filter-state")).to_have_value("FAILED")
        expect(page.locator("#filter-job_type")).to_have_value("t")
        expect(page.locator("#jobs")).to_contain_text("PAYMENT_DECLINED")
        assert page.locator("#jobs img").count() == 0

        # The search box: part of a dedup key; the form writes the filters into the address.
        page.select_option("#filter-state", "")
        page.fill("#filter-job_type", "")
        page.fill("#filter-q", "KEY-01")
        page.get_by_role("button", name="filter").click()
        expect(page).to_have_url(base + "/#/jobs?q=KEY-01")
        expect(page.locator("#jobs tbody tr")).to_have_count(10)
        # A search may read much of the history: it runs when asked, not every 5 s.
        expect(page.locator("#status")).to_contain_text("a search runs when asked")
        page.goto(base + f"/#/jobs?q={str(keyed[7])[:8]}")
        expect(page.locator("#jobs tbody tr")).to_have_count(1)
        expect(page.locator("#jobs tbody")).to_contain_text(str(keyed[7]))

        # Keyset pages of 50, the next one a link of its own that opens the same page anew.
        page.goto(base + "/#/jobs?q=key-")
        expect(page.locator("#jobs tbody tr")).to_have_count(50)
        first = set(rows_of(page))
        page.locator("#next-page").click()
        expect(page.locator("#jobs tbody tr")).to_have_count(5)
        assert "cursor=" in page.url
        second = set(rows_of(page))
        assert not first & second and first | second == {str(k) for k in keyed}
        shared = page.url
        page.goto(base + "/")
        page.goto(shared)
        expect(page.locator("#jobs tbody tr")).to_have_count(5)
        expect(page.locator("#next-page")).to_have_count(0)

        # A hostile search is refused by the API and said on the page, not run.
        page.goto(base + "/#/jobs?q=%3Cb%3Ex%3C%2Fb%3E%00")
        expect(page.locator("#jobs-error")).to_contain_text("query parameter 'q': holds a NUL")
        page.goto(base + "/#/jobs?q=" + "x" * 300)
        expect(page.locator("#jobs-error")).to_contain_text("at most 200 characters")


def test_bulk_replay_shows_the_count_asks_for_a_reason_and_acts_once(
    engine: Engine, page: Page
) -> None:
    from sqlalchemy import select

    from rota.core.tables import operator_actions

    store_types(engine, job_type("t"), job_type("other"))
    doomed = add_jobs(engine, job_type("t"), 3)
    finish_claimed(engine, 3, JobState.FAILED, "BOOM", "boom")
    (elsewhere,) = add_jobs(engine, job_type("other"))
    finish_claimed(engine, 1, JobState.FAILED, "BOOM", "boom")
    waiting = add_jobs(engine, job_type("t"), 2)
    asked: list[str] = []

    def answer(reply: str | None) -> Callable[[Dialog], None]:
        def on_dialog(dialog: Dialog) -> None:
            asked.append(dialog.message)
            if reply is None:
                dialog.dismiss()
            else:
                dialog.accept(reply)

        return on_dialog

    with running_api(engine) as base:
        page.goto(base + "/#/jobs?state=FAILED&job_type=t")
        expect(page.locator("#jobs tbody tr")).to_have_count(3)
        # Cancel is not offered for FAILED jobs; dismissing the question sends nothing.
        expect(page.locator("#bulk").get_by_role("button", name="cancel all…")).to_have_count(0)
        page.once("dialog", answer(None))
        page.get_by_role("button", name="replay all…").click()
        expect(page.locator("#notice")).to_contain_text("replay 3 jobs not sent")
        assert set(states(engine, doomed).values()) == {"FAILED"}

        page.once("dialog", answer("fixed <b>it</b>"))
        page.get_by_role("button", name="replay all…").click()
        expect(page.locator("#notice")).to_contain_text("replay done: 3 job(s) (3 now QUEUED)")
        assert asked[-1].startswith("Replay 3 jobs matching state=FAILED, job_type=t?")
        assert states(engine, [*doomed, elsewhere]) == {
            **{j: "QUEUED" for j in doomed},
            elsewhere: "FAILED",
        }
        with engine.connect() as conn:
            audit = conn.execute(select(operator_actions.c.job_id, operator_actions.c.reason)).all()
        assert sorted(audit) == sorted((j, "fixed <b>it</b>") for j in doomed)
        expect(page.locator("#jobs tbody tr")).to_have_count(0)

        # Cancel the waiting ones of type t, found by the same filters.
        page.goto(base + "/#/jobs?job_type=t&state=QUEUED")
        expect(page.locator("#jobs tbody tr")).to_have_count(5)
        expect(page.locator("#bulk").get_by_role("button", name="replay all…")).to_have_count(0)
        page.once("dialog", answer(""))
        page.get_by_role("button", name="cancel all…").click()
        expect(page.locator("#notice")).to_contain_text("cancel done: 5 job(s) (5 now CANCELLED)")
        assert asked[-1].startswith("Cancel 5 jobs matching state=QUEUED, job_type=t?")
        assert set(states(engine, [*doomed, *waiting]).values()) == {"CANCELLED"}


def test_a_job_page_separates_runs_and_shows_each_error_with_its_attempt(
    engine: Engine, page: Page
) -> None:
    store_types(engine, job_type("t", max_attempts=1))
    (job,) = add_jobs(engine, job_type("t", max_attempts=1))
    finish_claimed(engine, 1, JobState.FAILED, "UPSTREAM_DOWN", "first run's traceback")
    with running_api(engine) as base, loopback.Client(base_url=base) as client:
        assert client.post(f"/jobs/{job}/replay", json={"reason": "retry"}).status_code == 200
        finish_claimed(engine, 1, JobState.FAILED, "STILL_DOWN", "second traceback")
        page.goto(f"{base}/#/jobs/{job}")
        # Failed in run 2: the error shown names the attempt it came from, and only its own.
        expect(page.locator("#job tr.run")).to_have_count(2)
        expect(page.locator("#job-error h3")).to_have_text(
            "Failed with STILL_DOWN (run 2 attempt #1)"
        )
        expect(page.locator("#job-error")).not_to_contain_text("first run's traceback")

        r = client.post(f"/jobs/{job}/replay", json={"reason": "upstream is back"})
        assert r.status_code == 200
        finish_claimed(engine, 1, JobState.SUCCEEDED, None, "")
        page.reload()
        # Three runs, each numbered from #1, with a separator naming its replay.
        runs = page.locator("#job tr.run")
        expect(runs).to_have_count(3)
        expect(runs.nth(0)).to_have_text("Run 1")
        expect(runs.nth(1)).to_contain_text("Run 2 — replayed")
        expect(runs.nth(1)).to_contain_text("by anonymous: retry")
        expect(runs.nth(2)).to_contain_text("by anonymous: upstream is back")
        expect(page.locator("#job")).to_contain_text("run 3 · #1 SUCCEEDED")
        # A SUCCEEDED job shows no job-level error: the old ones are in their attempts' rows.
        expect(page.locator("#job-error")).to_have_count(0)
        expect(page.locator("#job")).not_to_contain_text("Last error")
        expect(page.locator("#job tbody tr", has_text="UPSTREAM_DOWN")).to_have_count(1)
        expect(page.locator("#job tbody tr", has_text="STILL_DOWN")).to_have_count(1)
        expect(page.locator("#job-actions")).to_contain_text("upstream is back")
        # No attempt kept any output: none is shown.
        expect(page.locator("#job tr.output-row")).to_have_count(0)


def _keep_output(engine: Engine, job: uuid.UUID, output: str) -> None:
    """The job's newest attempt kept ``output``, as the executor writes it with the outcome."""
    with engine.begin() as conn:
        generation = conn.execute(
            select(func.max(job_attempts.c.lease_generation)).where(job_attempts.c.job_id == job)
        ).scalar_one()
        conn.execute(
            insert(job_attempt_output).values(
                job_id=job, lease_generation=generation, output=output, dropped_bytes=0
            )
        )


def test_a_job_page_shows_each_attempts_own_output_across_replays(
    engine: Engine, page: Page
) -> None:
    """The real route numbers attempts across runs (1, 2, ...): run 2's #1 is n=2."""
    store_types(engine, job_type("t", max_attempts=1))
    (job,) = add_jobs(engine, job_type("t", max_attempts=1))
    finish_claimed(engine, 1, JobState.FAILED, "UPSTREAM_DOWN", "first")
    _keep_output(engine, job, "run one says\n<script>window.__xss = 4</script>\n")
    with running_api(engine) as base, loopback.Client(base_url=base) as client:
        assert client.post(f"/jobs/{job}/replay", json={"reason": "retry"}).status_code == 200
        finish_claimed(engine, 1, JobState.SUCCEEDED, None, "")
        _keep_output(engine, job, "run two says done\n")
        assert client.get(f"/jobs/{job}/attempts/2/output").text == "run two says done\n"
        page.goto(f"{base}/#/jobs/{job}")
        rows = page.locator("#job tr.output-row")
        expect(rows).to_have_count(2)
        expect(rows.nth(0).locator("summary")).to_have_text("output of run 1 #1 (3 lines)")
        expect(rows.nth(1).locator("summary")).to_have_text("output of run 2 #1 (2 lines)")
        rows.nth(0).locator("summary").click()
        expect(rows.nth(0).locator("pre")).to_contain_text("<script>window.__xss = 4</script>")
        assert page.evaluate("window.__xss") is None
        expect(rows.nth(1).locator("pre")).to_contain_text("run two says done")
        # Opened, it stays open across the page's refreshes.
        expect(page.locator("#status")).to_contain_text("updated")
        page.evaluate("document.getElementById('status').textContent = ''")
        expect(page.locator("#status")).to_contain_text("updated", timeout=15_000)
        expect(rows.nth(0).locator("pre")).to_be_visible()


def test_a_running_attempts_output_shows_and_grows_with_its_renewals(
    engine: Engine, page: Page
) -> None:
    """What a running attempt wrote so far, as its lease renewals keep it, is on the job
    page while it runs, and the page's refresh shows what the next renewal brought."""
    store_types(engine, job_type("t"))
    (job,) = add_jobs(engine, job_type("t"))
    (held,) = claim_as(engine, "w1", 1)

    def renew(output: str) -> None:
        assert renew_as(engine, "w1", job, held.lease_generation, output=output)

    renew("step 1 <b>bold?</b>\n")
    with running_api(engine) as base:
        page.goto(f"{base}/#/jobs/{job}")
        expect(page.locator("#job")).to_contain_text("running")
        row = page.locator("#job tr.output-row")
        expect(row.locator("summary")).to_have_text("output of #1 (2 lines)")
        renew("step 1 <b>bold?</b>\nstep 2\n")
        expect(row.locator("summary")).to_have_text("output of #1 (3 lines)", timeout=15_000)
        row.locator("summary").click()
        expect(row.locator("pre")).to_have_text("step 1 <b>bold?</b>\nstep 2\n")


def test_schedules_show_the_pause_reason_local_time_and_no_countdown_when_paused(
    engine: Engine, page: Page
) -> None:
    from rota.scheduler.apply import apply_schedule_file
    from rota.scheduler.schedule_file.loader import load_schedule_text

    text = (
        "job_types:\n  t: {handler: 'm:f'}\n"
        "schedules:\n"
        "  berlin: {job_type: t, cron: '0 2 * * *', timezone: Europe/Berlin}\n"
        "  utc-hourly: {job_type: t, cron: '0 * * * *'}\n"
    )
    apply_schedule_file(engine, load_schedule_text(text, "s.yaml"))
    with running_api(engine) as base, loopback.Client(base_url=base) as client:
        berlin = client.get("/schedules/berlin").json()
        next_utc = datetime.fromisoformat(berlin["next_fire_at"])
        local = next_utc.astimezone(ZoneInfo("Europe/Berlin")).strftime("%Y-%m-%d %H:%M:%S")
        page.goto(base + "/#/schedules")
        row = page.locator("#schedules tr", has_text="berlin")
        expect(row).to_contain_text(f"{local} Europe/Berlin")
        expect(row.locator(".countdown")).to_have_count(1)
        page.once("dialog", lambda d: d.accept("DB maintenance <b>window</b>"))
        row.get_by_role("button", name="pause").click()
        expect(page.locator("#notice")).to_contain_text("pause berlin done")
        expect(row.locator(".pause-reason")).to_contain_text(
            "by anonymous: DB maintenance <b>window</b>"
        )
        expect(row.locator(".countdown")).to_have_count(0)  # a paused schedule does not count down
        expect(row).to_contain_text(f"{local} Europe/Berlin")
        hourly = page.locator("#schedules tr", has_text="utc-hourly")
        expect(hourly.locator(".countdown")).to_have_count(1)
        expect(hourly.locator(".local")).to_have_count(0)  # UTC alone: no second copy of it
        # The schedule's page says the same.
        page.goto(base + "/#/schedules/berlin")
        expect(page.locator("#schedule .pause-reason")).to_contain_text(
            "DB maintenance <b>window</b>"
        )
        expect(page.locator("#schedule .countdown")).to_have_count(0)
        expect(page.locator("#schedule")).to_contain_text(f"{local} Europe/Berlin")
        assert page.locator("#schedule b").count() == 0


def test_the_script_writes_no_html_from_strings() -> None:
    from rota.api.dashboard import _asset

    script = _asset("dashboard.js")
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in script, sink


def test_schedules_show_last_outcome_success_and_lateness(engine: Engine, page: Page) -> None:
    """Real rows: two occurrences' jobs end through the executor's finish statement (which
    keeps the schedule's last outcome and success), and the later one's lateness is
    recorded as the deadline check records it."""
    from rota.core.queries.jobs_insert import NewJob, insert_jobs_or_skip
    from rota.core.queries.late_occurrences import LateRecord, insert_late_or_skip
    from rota.core.states import LateReason
    from rota.scheduler.apply import apply_schedule_file
    from rota.scheduler.schedule_file.loader import load_schedule_text

    text = (
        "job_types:\n  t: {handler: 'm:f'}\n"
        "schedules:\n  nightly: {job_type: t, cron: '0 2 * * *', deadline: 5m}\n"
    )
    apply_schedule_file(engine, load_schedule_text(text, "s.yaml"))
    spec = job_type("t")
    first, second = datetime(2026, 12, 3, 2, tzinfo=UTC), datetime(2026, 12, 4, 2, tzinfo=UTC)
    for instant, state in ((first, JobState.SUCCEEDED), (second, JobState.FAILED)):
        job = NewJob.of_type(spec, schedule_name="nightly", scheduled_for=instant)
        with engine.begin() as conn:
            insert_jobs_or_skip(conn, [job])
        finish_claimed(engine, 1, state, "BOOM" if state is JobState.FAILED else None, "")
    late_job = str(job.job_id)
    with engine.begin() as conn:
        insert_late_or_skip(
            conn,
            [
                LateRecord(
                    "nightly",
                    second,
                    second + timedelta(minutes=5),
                    LateReason.FAILED,
                    job.job_id,
                    second + timedelta(minutes=5, seconds=1),
                )
            ],
        )
    with running_api(engine) as base:
        page.goto(base + "/#/schedules")
        row = page.locator("#schedules tr", has_text="nightly")
        expect(row.locator(".last-outcome .bad")).to_have_text("FAILED")
        expect(row.locator(".last-outcome")).to_contain_text("for 2026-12-04 02:00:00Z")
        expect(row.locator(".last-success")).to_have_text("last success 2026-12-03 02:00:00Z")
        expect(row.locator(".late.bad")).to_contain_text("late: failed")
        expect(row.locator(".late")).to_contain_text("due by 2026-12-04 02:05:00Z")
        expect(row.locator(".late a")).to_have_text(late_job)
        page.goto(base + "/#/schedules/nightly")
        fields = page.locator("#schedule dl")
        expect(fields).to_contain_text("last outcomeFAILED for 2026-12-04 02:00:00Z")
        expect(fields).to_contain_text("last success2026-12-03 02:00:00Z")
        expect(fields.locator(".late.bad")).to_contain_text("late: failed")
        assert page.locator("#schedule dl b").count() == 0
