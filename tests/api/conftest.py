"""The browser the API's browser tests share: one Chromium per pytest worker.

A launch costs about 1.9 s of CPU (Playwright's driver and the browser); each
test opens a context of its own, so no cookie, storage or page outlives it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser

from tests.api.surface import chromium


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    with chromium() as b:
        yield b
