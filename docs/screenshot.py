"""Take the docs' screenshot of the dashboard: a real rota under a real workload.

::

    .venv/bin/python docs/screenshot.py [--seconds 180] [--out docs/dashboard.png]

Runs, in this process, a scheduler, an executor and the API on a fresh SQLite
database; submits jobs through the API for ``--seconds`` (some fail, some
retry, one is cancelled while it runs), then opens the dashboard in headless
Chromium (Debian's ``chromium``, driven by Playwright) and saves a screenshot
of the overview, and one of the jobs view (``dashboard-jobs.png`` beside it).
Nothing in the pictures is made up: every number is what rota measured during
the run.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import sync_playwright

from rota.api import create_app
from rota.api.server import BackgroundServer, bind
from rota.core.database import make_engine
from rota.executor import PermanentError, RetryableError
from rota.executor.service import Executor
from rota.migrations.runner import upgrade
from rota.scheduler.apply import apply_schedule_file
from rota.scheduler.schedule_file.loader import load_schedule_text
from rota.scheduler.service import SchedulerService

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

DEMO = """
job_types:
  report.generate:
    handler: __main__:report
    pool: reports
  invoice.send:
    handler: __main__:flaky
    max_attempts: 3
    backoff: {base: 1s, max: 5s}
    max_queued: 500
  search.reindex:
    handler: __main__:reindex
    lease: 10s
schedules:
  hourly-report:
    job_type: report.generate
    every: 10s
  reindex:
    job_type: search.reindex
    every: 30s
  nightly-invoices:
    job_type: invoice.send
    cron: "0 2 * * *"
    timezone: Europe/Berlin
"""


def report(ctx: Any) -> None:
    total = 5
    for done in range(total):
        ctx.progress(stage="GENERATING", done=done, total=total)
        ctx.checkpoint()
        time.sleep(random.uniform(0.01, 0.12))


def flaky(ctx: Any) -> None:
    time.sleep(random.uniform(0.005, 0.05))
    roll = random.random()
    if roll < 0.04:
        raise PermanentError("CARD_DECLINED", "the card <4242> was declined by the issuer")
    if roll < 0.3:
        raise RetryableError("UPSTREAM_503", "payments API answered 503 Service Unavailable")


def reindex(ctx: Any) -> None:
    deadline = time.monotonic() + random.uniform(2.0, 6.0)
    while time.monotonic() < deadline:
        ctx.checkpoint()
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=180.0)
    parser.add_argument("--out", default=str(Path(__file__).with_name("dashboard.png")))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        engine = make_engine(f"sqlite:///{Path(tmp) / 'demo.db'}")
        upgrade(engine)
        apply_schedule_file(engine, load_schedule_text(DEMO, "demo.yaml"))
        stop = threading.Event()
        executor = Executor(
            engine, ("default", "reports"), concurrency=8, metrics_interval=5, sweep_interval=1
        )
        scheduler = SchedulerService(engine)
        threads = [
            threading.Thread(target=executor.run, args=(stop,), daemon=True),
            threading.Thread(target=scheduler.run, args=(stop,), daemon=True),
        ]
        for t in threads:
            t.start()
        sock = bind("127.0.0.1", 0)
        base = f"http://127.0.0.1:{sock.getsockname()[1]}"
        server = BackgroundServer(create_app(engine), sock)
        server.start()
        try:
            workload(base, args.seconds)
            time.sleep(6)  # one more metrics flush
            shoot(base, args.out)
        finally:
            stop.set()
            for t in threads:
                t.join(30)
            server.stop()
            engine.dispose()
    print(f"wrote {args.out}")


def workload(base: str, seconds: float) -> None:
    with httpx.Client(base_url=base, timeout=10) as client:
        deadline = time.monotonic() + seconds
        cancelled = False
        while time.monotonic() < deadline:
            for _ in range(random.randint(1, 4)):
                client.post("/jobs", json={"job_type": "invoice.send", "args": {"n": 1}})
            client.post("/jobs", json={"job_type": "report.generate", "priority": 1})
            if not cancelled and time.monotonic() > deadline - seconds / 2:
                r = client.post("/jobs", json={"job_type": "search.reindex"})
                time.sleep(1.5)
                client.post(r.headers["location"] + "/cancel")
                cancelled = True
            time.sleep(random.uniform(0.3, 1.2))


def shoot(base: str, out: str) -> None:
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS, headless=True
        )
        page = browser.new_page(viewport={"width": 1400, "height": 3000})
        page.goto(base + "/")
        page.wait_for_selector("#queues h2")
        page.wait_for_timeout(1000)
        page.screenshot(path=out, full_page=False)
        # The jobs view as a link shares it: the failed jobs of one type, searched by error.
        page.set_viewport_size({"width": 1400, "height": 900})
        page.goto(base + "/#/jobs?state=FAILED&job_type=invoice.send&q=declined")
        page.wait_for_selector("#jobs h2")
        page.wait_for_timeout(1000)
        page.screenshot(path=str(Path(out).with_name("dashboard-jobs.png")), full_page=False)
        browser.close()


if __name__ == "__main__":
    main()
