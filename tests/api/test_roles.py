"""Tokens with names and roles, from ``ROTA_API_TOKENS_FILE``, on both backends: a viewer
reads and gets 403 on every action (against the real ``rota serve``, whose output must
hold no token), an operator acts, an admin does everything (unlisted routes included);
``ROTA_API_TOKEN`` is an admin named ``default``. The dashboard shows a viewer no
buttons it cannot use (the real serve too). The others use the app with the table
``token_table`` reads from the file, served in a thread.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect
from sqlalchemy import Engine, func, select

from rota.api.identities import token_table
from rota.api.problems import PROBLEM_JSON
from rota.core.queries.job_types import load_job_types
from rota.core.queries.schedules import get_schedule
from rota.core.tables import jobs, operator_actions
from rota.scheduler.apply import apply_schedule_file
from rota.scheduler.schedule_file.loader import load_schedule_text
from tests.api.surface import Served, rota_serve
from tests.support import loopback
from tests.support.api_support import fail, running_api
from tests.support.executor_support import add_jobs, job_row

SCHEDULES = """
job_types:
  t:
    handler: tests.handlers.plain:noop
schedules:
  nightly:
    job_type: t
    cron: "0 2 * * *"
"""
TOKENS = {
    "vera": ("viewer", "v-token-1"),
    "otto": ("operator", "o-token-2"),
    "ada": ("admin", "a-token-3"),
}
DEFAULT_TOKEN = "the-default-token"


def sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def tokens_file(path: Path) -> Path:
    lines = ["tokens:"]
    for name, (role, token) in TOKENS.items():
        lines += [f"  - name: {name}", f"    role: {role}", f"    sha256: {sha256(token)}"]
    path.write_text("\n".join(lines) + "\n")
    return path


def as_(name: str) -> dict[str, str]:
    token = DEFAULT_TOKEN if name == "default" else TOKENS[name][1]
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def served(engine: Engine, db_url: str, tmp_path: Path) -> Iterator[Served]:
    """The real ``rota serve`` with the tokens file: for the test that reads its output."""
    apply_schedule_file(engine, load_schedule_text(SCHEDULES, "s.yaml"))
    env = {
        "ROTA_API_TOKENS_FILE": str(tokens_file(tmp_path / "tokens.yaml")),
        "ROTA_API_TOKEN": DEFAULT_TOKEN,
    }
    with rota_serve(db_url, tmp_path, env=env) as s:
        yield s


@pytest.fixture
def api(engine: Engine, tmp_path: Path) -> Iterator[str]:
    """The same app and tokens, served in a thread (``token_table`` is what serve reads)."""
    apply_schedule_file(engine, load_schedule_text(SCHEDULES, "s.yaml"))
    tokens = token_table(DEFAULT_TOKEN, str(tokens_file(tmp_path / "tokens.yaml")))
    with running_api(engine, tokens=tokens) as base:
        yield base


def two_jobs(engine: Engine) -> tuple[uuid.UUID, uuid.UUID]:
    """One QUEUED and one FAILED job of type ``t``."""
    with engine.connect() as conn:
        spec = load_job_types(conn)["t"]
    queued, failed = add_jobs(engine, spec, 2)
    fail(engine, [failed])
    return queued, failed


def snapshot(engine: Engine) -> tuple[int, int, bool]:
    with engine.connect() as conn:
        n_jobs = conn.execute(select(func.count()).select_from(jobs)).scalar_one()
        n_actions = conn.execute(select(func.count()).select_from(operator_actions)).scalar_one()
        row = get_schedule(conn, "nightly")
    assert row is not None
    return int(n_jobs), int(n_actions), bool(row["paused"])


def actions(queued: uuid.UUID, failed: uuid.UUID) -> list[tuple[str, int]]:
    """Every operator action, in an order in which each one succeeds: (path, status)."""
    return [
        ("/jobs", 202),
        (f"/jobs/{queued}/cancel", 200),
        (f"/jobs/{failed}/replay", 200),
        ("/schedules/nightly/pause", 200),
        ("/schedules/nightly/resume", 200),
        ("/schedules/nightly/trigger", 202),
        ("/jobs/replay", 200),  # the bulk forms, with the body BODIES gives
        ("/jobs/cancel", 200),
    ]


BODIES = {p: {"job_type": "t"} for p in ("/jobs", "/jobs/replay", "/jobs/cancel")}


def reads(queued: uuid.UUID) -> list[str]:
    return [
        "/jobs",
        f"/jobs/{queued}",
        "/schedules",
        "/schedules/nightly",
        "/metrics",
        "/dashboard/data",
        "/openapi.json",
        "/whoami",
        "/",
    ]


def test_a_viewer_reads_and_is_refused_every_action(served: Served, engine: Engine) -> None:
    queued, failed = two_jobs(engine)
    before = snapshot(engine)
    with loopback.Client(base_url=served.base, headers=as_("vera"), timeout=10) as c:
        for path in reads(queued):
            assert c.get(path).status_code == 200, path
        assert c.get("/whoami").json() == {"actor": "vera", "role": "viewer"}
        for path, _ in actions(queued, failed):
            for r in (c.post(path, json={"job_type": "t"}), c.post(path)):
                assert r.status_code == 403, (path, r.text)
                assert r.headers["content-type"] == PROBLEM_JSON
                problem = r.json()
                assert "viewer" in problem["detail"] and "operator" in problem["detail"]
        assert c.delete(f"/jobs/{queued}").status_code == 403
    assert snapshot(engine) == before
    assert job_row(engine, failed)["state"] == "FAILED"
    assert "v-token-1" not in served.out.text() and sha256("v-token-1") not in served.out.text()


def test_an_operator_acts_and_is_refused_what_is_not_listed(api: str, engine: Engine) -> None:
    queued, failed = two_jobs(engine)
    with loopback.Client(base_url=api, headers=as_("otto"), timeout=10) as c:
        assert c.get("/whoami").json() == {"actor": "otto", "role": "operator"}
        for path in reads(queued):
            assert c.get(path).status_code == 200, path
        for path, status in actions(queued, failed):
            r = c.post(path, json=BODIES.get(path, {}))
            assert r.status_code == status, (path, r.text)
        # A route not listed as a read or an operator action is the admin's.
        r = c.delete(f"/jobs/{queued}")
        assert r.status_code == 403 and "admin" in r.json()["detail"]
    assert job_row(engine, queued)["state"] == "CANCELLED"
    with engine.connect() as conn:
        actors = set(conn.execute(select(operator_actions.c.actor)).scalars())
    assert actors == {"otto"}


@pytest.mark.parametrize("name", ["ada", "default"])
def test_an_admin_does_everything(api: str, engine: Engine, name: str) -> None:
    queued, failed = two_jobs(engine)
    with loopback.Client(base_url=api, headers=as_(name), timeout=10) as c:
        assert c.get("/whoami").json() == {"actor": name, "role": "admin"}
        for path in reads(queued):
            assert c.get(path).status_code == 200, path
        for path, status in actions(queued, failed):
            r = c.post(path, json=BODIES.get(path, {}))
            assert r.status_code == status, (path, r.text)
        # Unlisted: past the role check, to the app (which has no such route).
        assert c.delete(f"/jobs/{queued}").status_code == 405
    with engine.connect() as conn:
        actors = set(conn.execute(select(operator_actions.c.actor)).scalars())
    assert actors == {name}


def test_an_unknown_token_is_401(api: str) -> None:
    hashed = f"Bearer {sha256('v-token-1')}"  # the hash is no token
    for headers in ({}, {"Authorization": "Bearer nobody"}, {"Authorization": hashed}):
        r = loopback.get(f"{api}/jobs", headers=headers)
        assert r.status_code == 401 and r.headers["content-type"] == PROBLEM_JSON


def test_without_any_token_everything_is_open_on_loopback(engine: Engine) -> None:
    with running_api(engine) as base:
        assert loopback.get(f"{base}/whoami").json() == {"actor": "anonymous", "role": "admin"}


def test_the_dashboard_hides_the_buttons_a_viewer_cannot_use(
    served: Served, engine: Engine, browser: Browser
) -> None:
    queued, failed = two_jobs(engine)
    for name, can_act in (("vera", False), ("otto", True)):
        context = browser.new_context()
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))  # noqa: B023 - used at once
        page.goto(served.base + "/")
        page.fill("#token", TOKENS[name][1])
        page.click("#login button")
        expect(page.locator("#queues h2")).to_have_text("Queues", timeout=10_000)
        expect(page.locator("#failed")).to_contain_text(str(failed))
        expect(page.locator("#schedules")).to_contain_text("nightly")
        buttons = page.locator("button:visible", has_not_text="Open")
        if can_act:
            expect(page.locator("#failed").get_by_role("button", name="replay")).to_have_count(1)
            expect(page.locator("#schedules").get_by_role("button", name="pause")).to_have_count(1)
        else:
            expect(buttons).to_have_count(0)
        page.goto(f"{served.base}/#/jobs/{queued}")
        expect(page.locator("#job h2")).to_contain_text(str(queued))
        cancel = page.locator("#job").get_by_role("button", name="cancel")
        expect(cancel).to_have_count(1 if can_act else 0)
        # The jobs view's bulk actions, and a schedule's page, are an operator's too.
        page.goto(f"{served.base}/#/jobs?state=FAILED")
        expect(page.locator("#jobs")).to_contain_text(str(failed))
        expect(page.locator("#bulk")).to_have_count(1 if can_act else 0)
        page.goto(f"{served.base}/#/schedules/nightly")
        expect(page.locator("#schedule h2")).to_have_text("Schedule nightly")
        expect(page.locator("#schedule button")).to_have_count(3 if can_act else 0)
        if not can_act:
            expect(page.locator("main button")).to_have_count(0)
        context.close()
        assert errors == [], errors
