"""The alert rules name metrics, labels and label values a real ``rota serve`` exports.

A ``rota run`` makes something of every kind worth alerting on happen on an
SQLite file (a job that fails, and misses its schedule's deadline; a schedule
that succeeds; a schedule skipping occurrences because its earlier job still
waits in a pool no executor serves) and stops; then a real
``rota serve`` on a free port is scraped. The rules' metric names must be ones
the scrape's families produce; the labels a rule matches or groups by must be
on those samples. An expired lease needs an executor killed and a lease run
out, too slow to stage here: ``rota_expired_leases_total`` is checked by name,
its ``job_type`` label only through its family (a counter the scrape declares).
"""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.deploy.kit import DEPLOY

pytestmark = pytest.mark.slow

RULES = DEPLOY / "prometheus" / "rota-alerts.yml"
ROTA = [sys.executable, "-m", "rota.cli.main"]
SCHEDULES = """\
job_types:
  kit.fails:
    command: ["/bin/sh", "-c", "exit 3"]
    max_attempts: 1
  kit.waits:
    command: ["/bin/true"]
    pool: unserved
  kit.works:
    command: ["/bin/true"]
schedules:
  kit-works:
    job_type: kit.works
    every: 1s
  kit-fails:
    job_type: kit.fails
    every: 1s
    deadline: 1s
  kit-waits:
    job_type: kit.waits
    every: 1s
    overlap: forbid
"""
NO_SAMPLES_EXPECTED = {"rota_expired_leases_total"}
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}
SELECTOR = re.compile(r"\b(rota_\w+)\s*\{([^}]*)\}")
MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"')
GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")

Samples = dict[str, list[dict[str, str]]]  # sample name -> each sample's labels


def wait_for(done: Callable[[], object], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def count(db: Path, sql: str) -> int:
    """``sql``'s count, read-only (never creating the file); 0 before the tables exist."""
    try:
        with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
            return int(conn.execute(sql).fetchone()[0])
    except sqlite3.OperationalError:  # no file yet, or not migrated yet
        return 0


def stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@contextmanager
def running_rota(tmp_path: Path, url: str) -> Iterator[subprocess.Popen[str]]:
    """``rota run`` (migrate, apply, a scheduler and an executor of pool default)."""
    schedules = tmp_path / "schedules.yaml"
    schedules.write_text(SCHEDULES)
    proc = subprocess.Popen(
        [*ROTA, "run", "--db", url, "--config", str(schedules), "--no-serve", "--pools", "default"],
        cwd=tmp_path,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        yield proc
    finally:
        stop(proc)


@contextmanager
def serving(tmp_path: Path, url: str) -> Iterator[str]:
    """A real ``rota serve`` on a free port (it picks one: --port 0); yields its address."""
    proc = subprocess.Popen(
        [*ROTA, "serve", "--db", url, "--port", "0", "--log-format", "json"],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        address = None
        for line in proc.stderr:
            record = json.loads(line) if line.startswith("{") else {}
            if record.get("event") == "serve_started":
                address = str(record["address"])
                break
        assert address is not None, f"rota serve exited with {proc.wait()}"
        yield address
    finally:
        stop(proc)


def scrape(address: str) -> tuple[Samples, set[str]]:
    """The samples of GET /metrics, and every sample name its families declare."""
    with urllib.request.urlopen(f"{address}/metrics", timeout=30) as response:
        text = response.read().decode()
    samples: Samples = defaultdict(list)
    declared: set[str] = set()
    for family in text_string_to_metric_families(text):
        declared.update(family.name + suffix for suffix in SUFFIXES[family.type])
        for sample in family.samples:
            samples[sample.name].append(dict(sample.labels))
    return samples, declared


def test_alert_rules_use_only_metrics_and_labels_of_a_real_scrape(tmp_path: Path) -> None:
    db = tmp_path / "rota.db"
    url = f"sqlite:///{db}"
    failed = "SELECT count(*) FROM jobs WHERE state = 'FAILED'"
    skipped = "SELECT count(*) FROM schedule_skips WHERE reason = 'overlap'"
    late = "SELECT count(*) FROM late_occurrences"
    succeeded = "SELECT count(*) FROM schedule_outcomes WHERE last_success_instant IS NOT NULL"
    with running_rota(tmp_path, url) as run:
        wait_for(lambda: run.poll() is not None or count(db, "SELECT count(*) FROM job_types"),
                 "the schedule file applied")  # fmt: skip
        with serving(tmp_path, url) as address:
            wait_for(lambda: run.poll() is not None
                     or (count(db, failed) and count(db, skipped) and count(db, late)
                         and count(db, succeeded)),
                     "a FAILED job, a skipped occurrence, a late one and a success")  # fmt: skip
            assert run.poll() is None, f"rota run exited with {run.returncode}"
            stop(run)  # a graceful stop writes the metrics observed since the last flush
            assert run.returncode == 0
            samples, declared = scrape(address)
    exprs = [rule["expr"] for group in yaml.safe_load(RULES.read_text())["groups"]
             for rule in group["rules"]]  # fmt: skip
    used = {name for expr in exprs for name in re.findall(r"\brota_\w+", expr)}
    assert used, "the rules name no rota metric"
    assert used <= declared, f"not exported: {sorted(used - declared)}"
    assert {n for n in used if n not in samples} <= NO_SAMPLES_EXPECTED, "extend the history"
    for expr in exprs:
        names = set(re.findall(r"\brota_\w+", expr))
        for name, matchers in SELECTOR.findall(expr):
            for label, op, value in MATCHER.findall(matchers):
                seen = {s[label] for s in samples[name] if label in s}
                assert seen, f"{name} has no label {label}"
                if op == "=":
                    assert value in seen, f"{name}{{{label}={value!r}}}: seen {sorted(seen)}"
        labels = {label for n in names for s in samples.get(n, []) for label in s}
        for grouping in GROUPING.findall(expr):
            for label in (g.strip() for g in grouping.split(",") if g.strip()):
                if names <= NO_SAMPLES_EXPECTED:
                    continue
                assert label in labels, f"{expr}: no sample of {sorted(names)} has {label}"
