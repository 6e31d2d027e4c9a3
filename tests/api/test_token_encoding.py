"""A token compares as UTF-8 however it was typed: into the dashboard (whose browser can
send only Latin-1 header bytes), with curl (UTF-8 bytes) or with a Latin-1 client.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect
from sqlalchemy import Engine

from tests.support import loopback
from tests.support.api_support import running_api
from tests.support.executor_support import job_type, store_types

LATIN_1 = "pässwörd-ça-va"  # every character fits in one Latin-1 byte
BEYOND = "пароль-密码-🔑-ä"  # no Latin-1 form at all


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context()
    p = context.new_page()
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    yield p
    context.close()
    assert errors == [], errors


@pytest.mark.parametrize("token", [LATIN_1, BEYOND], ids=["latin-1", "beyond latin-1"])
def test_a_non_ascii_token_typed_into_the_dashboard_works(
    engine: Engine, page: Page, token: str
) -> None:
    store_types(engine, job_type("t"))
    with running_api(engine, token=token) as base:
        response = page.goto(base + "/")
        assert response is not None and response.status == 401
        page.fill("#token", token[:-1] + "x")
        page.click("#login button")
        expect(page.locator("#status")).to_contain_text("token", timeout=10_000)
        page.fill("#token", token)
        page.click("#login button")
        expect(page.locator("#queues h2")).to_have_text("Queues", timeout=10_000)
        expect(page.locator("#login")).to_be_hidden()


@pytest.mark.parametrize("token", [LATIN_1, BEYOND, "plain-ascii"])
def test_a_token_compares_as_utf_8_from_any_client(engine: Engine, token: str) -> None:
    with running_api(engine, token=token) as base, loopback.Client(base_url=base) as c:
        raw = b"Bearer " + token.encode("utf-8")  # curl -H 'Authorization: Bearer ...'
        assert c.get("/jobs", headers={b"Authorization": raw}).status_code == 200
        if token.isascii() or all(ord(ch) < 256 for ch in token):  # urllib, a browser
            latin = b"Bearer " + token.encode("latin-1")
            assert c.get("/jobs", headers={b"Authorization": latin}).status_code == 200
        encoded = base64.b64encode(token.encode("utf-8"))  # what the dashboard sends
        assert c.get("/jobs", headers={b"X-Rota-Token": encoded}).status_code == 200
        wrong = base64.b64encode((token + "x").encode("utf-8"))
        wrong_headers: list[dict[bytes, bytes]] = [
            {b"X-Rota-Token": wrong},
            {b"X-Rota-Token": b"not base64!"},
            {b"Authorization": b"Bearer " + (token + "x").encode("utf-8")},
            {b"Authorization": b"Bearer " + token.encode("utf-8")[:-1]},
            {b"Authorization": b"Bearer " + token.encode("utf-8") + b"\xff"},
        ]
        for headers in wrong_headers:
            r = c.get("/jobs", headers=headers)
            assert r.status_code == 401, headers
            assert token not in r.text
