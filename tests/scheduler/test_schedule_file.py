"""The schedule file loader: the contract's format, and every problem at its line."""

from __future__ import annotations

import textwrap
from datetime import date, timedelta
from pathlib import Path

import pytest

from rota.core.config import (
    Ambiguous,
    Backoff,
    DstPolicy,
    JobTypeSpec,
    MisfirePolicy,
    Nonexistent,
    OverlapPolicy,
    ScheduleFile,
    ScheduleSpec,
)
from rota.scheduler.schedule_file.errors import ConfigError, Problem
from rota.scheduler.schedule_file.loader import load_schedule_file, load_schedule_text
from tests.support.rules_helpers import at

CONTRACT_EXAMPLE = """\
defaults:                 # optional; any schedule field
  timezone: UTC
  misfire: coalesce
job_types:                # optional; how each job type runs
  report.generate:
    handler: myapp.reports:generate     # import path of a callable(ctx)
    pool: reports
    timeout: 10m          # execution timeout of one attempt
    lease: 60s
    max_attempts: 5
    backoff: {base: 5s, max: 15m}       # delay = min(max, base * 2^(n-1)) + jitter
    idempotent: true      # false: an attempt with unknown outcome is not blindly rerun
  nightly.cleanup:
    command: ["/usr/bin/env", "sh", "-c", "echo cleaning"]   # a subprocess handler
  invoice.generate:
    handler: myapp.invoices:generate
schedules:
  nightly-report:
    job_type: report.generate
    cron: "0 2 * * *"     # 5 fields, or 6 with seconds first
    timezone: Europe/Berlin
    misfire: catch_up     # catch_up | skip | coalesce
    grace: 5m             # late by less than this counts as on time
    catch_up_window: 1d   # older misses are skipped, and counted as skipped
    dst:
      nonexistent: shift  # shift | skip
      ambiguous: first    # first | last | both
    jitter: 30s           # deterministic per occurrence: every replica agrees
    overlap: allow        # allow | forbid | replace
    payload_ref: "s3://bucket/reports/nightly.json"
    args: {region: eu}    # small JSON, optional
  month-end-invoices:
    job_type: invoice.generate
    rrule: "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1;BYHOUR=2;BYMINUTE=0;BYSECOND=0"
    timezone: America/New_York
    exclude_dates: [2026-12-31]
  ping:
    job_type: nightly.cleanup
    every: 90s            # fixed interval in real time; no calendar, no DST
    anchor: 2026-01-01T00:00:00Z   # optional; instants are anchor + k * every
"""

JOB_TYPES = """\
job_types:
  work:
    handler: app.jobs:work
"""


def load(text: str) -> ScheduleFile:
    return load_schedule_text(textwrap.dedent(text), "f.yaml")


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as err:
        load(text)
    assert str(err.value) == "\n".join(str(p) for p in err.value.problems)
    return [str(p) for p in err.value.problems]


def with_schedule(body: str) -> str:
    """A file with the job type ``work`` and one schedule ``s``, whose fields start at line 6."""
    return JOB_TYPES + "schedules:\n  s:\n" + textwrap.indent(textwrap.dedent(body), "    ")


# --- a good file -------------------------------------------------------------


def test_contract_example_loads() -> None:
    f = load_schedule_text(CONTRACT_EXAMPLE, "schedules.yaml")
    assert f.path == "schedules.yaml"
    assert list(f.schedules) == ["nightly-report", "month-end-invoices", "ping"]
    nightly = f.schedules["nightly-report"]
    assert nightly.job_type == "report.generate"
    assert nightly.cron == "0 2 * * *"
    assert nightly.timezone == "Europe/Berlin"
    assert nightly.misfire is MisfirePolicy.CATCH_UP
    assert nightly.grace == timedelta(minutes=5)
    assert nightly.catch_up_window == timedelta(days=1)
    assert nightly.dst == DstPolicy(Nonexistent.SHIFT, Ambiguous.FIRST)
    assert nightly.jitter == timedelta(seconds=30)
    assert nightly.overlap is OverlapPolicy.ALLOW
    assert nightly.payload_ref == "s3://bucket/reports/nightly.json"
    assert nightly.args == {"region": "eu"}
    invoices = f.schedules["month-end-invoices"]
    assert invoices.exclude_dates == (date(2026, 12, 31),)
    assert invoices.misfire is MisfirePolicy.COALESCE  # from defaults
    assert invoices.dst is None  # the rule's default applies
    ping = f.schedules["ping"]
    assert ping.every == timedelta(seconds=90)
    assert ping.anchor == at("2026-01-01T00:00:00Z")
    assert ping.timezone == "UTC"
    assert f.job_types["report.generate"] == JobTypeSpec(
        name="report.generate",
        handler="myapp.reports:generate",
        pool="reports",
        timeout=timedelta(minutes=10),
        lease=timedelta(seconds=60),
        max_attempts=5,
        backoff=Backoff(base=timedelta(seconds=5), max=timedelta(minutes=15)),
        idempotent=True,
    )
    assert f.job_types["nightly.cleanup"].command == ("/usr/bin/env", "sh", "-c", "echo cleaning")
    assert f.job_types["nightly.cleanup"].handler is None


def test_defaults_of_the_model_apply_when_fields_are_absent() -> None:
    f = load(with_schedule("job_type: work\ncron: '*/5 * * * *'\n"))
    s = f.schedules["s"]
    assert (s.timezone, s.misfire, s.grace, s.catch_up_window, s.overlap, s.jitter) == (
        "UTC",
        MisfirePolicy.COALESCE,
        timedelta(minutes=1),
        timedelta(days=1),
        OverlapPolicy.ALLOW,
        timedelta(0),
    )
    assert f.job_types["work"] == JobTypeSpec(name="work", handler="app.jobs:work")


def test_loaded_mappings_are_read_only() -> None:
    f = load(with_schedule("job_type: work\nevery: 1m\n"))
    with pytest.raises(TypeError):
        f.schedules["x"] = f.schedules["s"]  # type: ignore[index]


def test_empty_sections_are_fine() -> None:
    f = load("defaults:\njob_types:\nschedules:\n")
    assert (dict(f.schedules), dict(f.job_types)) == ({}, {})


def test_a_schedule_value_replaces_the_default() -> None:
    f = load(
        """\
        defaults:
          timezone: Europe/Berlin
          job_type: work
          args: {a: 1}
          anchor: 2026-01-01T00:00:07Z
          dst: {ambiguous: both}
          exclude_dates: [2026-12-25]
        job_types:
          work: {handler: 'app.jobs:work'}
        schedules:
          calendar:
            cron: "0 2 * * *"
            args: {b: 2}
          interval:
            every: 1m
            timezone: UTC
        """
    )
    calendar, interval = f.schedules["calendar"], f.schedules["interval"]
    assert (calendar.job_type, calendar.timezone, calendar.args) == (
        "work",
        "Europe/Berlin",
        {"b": 2},
    )
    assert calendar.anchor is None  # a default anchor is for every: rules only
    assert calendar.exclude_dates == (date(2026, 12, 25),)
    # a partial dst block: the missing key is the fixed-time rule's default
    assert calendar.dst == DstPolicy(Nonexistent.SHIFT, Ambiguous.BOTH)
    assert interval.anchor == at("2026-01-01T00:00:07Z")
    assert (interval.dst, interval.exclude_dates, interval.timezone) == (None, (), "UTC")


def test_partial_dst_on_a_real_time_rule_takes_its_default() -> None:
    f = load(with_schedule("job_type: work\ncron: '*/5 * * * *'\ndst: {ambiguous: first}\n"))
    assert f.schedules["s"].dst == DstPolicy(Nonexistent.SKIP, Ambiguous.FIRST)


def test_merge_keys_and_extension_keys() -> None:
    f = load(
        """\
        x-common: &common
          job_type: work
          timezone: Europe/Berlin
        job_types:
          work: {handler: 'app.jobs:work'}
        schedules:
          a:
            <<: *common
            cron: "0 2 * * *"
          b:
            <<: *common
            timezone: UTC
            every: 5m
        """
    )
    assert f.schedules["a"].timezone == "Europe/Berlin"
    assert f.schedules["b"].timezone == "UTC"


def test_null_optional_fields_count_as_absent() -> None:
    f = load(
        JOB_TYPES.replace("app.jobs:work", "app.jobs:work\n    timeout:")
        + "schedules:\n  s:\n    job_type: work\n    every: 1m\n    payload_ref:\n    args:\n"
    )
    assert (f.schedules["s"].payload_ref, f.schedules["s"].args) == (None, None)
    assert f.job_types["work"].timeout is None


def test_six_field_cron_rrule_with_dtstart_and_string_dates() -> None:
    f = load(
        with_schedule(
            """\
            job_type: work
            rrule: |
              DTSTART:20260105T090000
              RRULE:FREQ=WEEKLY;INTERVAL=2
            exclude_dates: ["2026-02-02"]
            """
        )
    )
    assert f.schedules["s"].exclude_dates == (date(2026, 2, 2),)
    assert load(with_schedule("job_type: work\ncron: '0 30 2 * * *'\n")).schedules["s"].cron


# --- problems, each at its line ----------------------------------------------


def test_every_problem_is_reported_at_its_line() -> None:
    text = """\
        defaults:
          timzone: UTC
          misfire: coalese
          cron: "0 0 * * *"
        job_types:
          report.generate:
            handler: myapp.reports.generate
            pool: re ports
            timeout: 10
            lease: 60s
            lease: 30s
            max_attempts: 0
            backoff: {base: 5s, mx: 3}
            idempotent: "yes"
          cleanup:
            command: []
            handler: a:b
          nothing:
        schedules:
          nightly-report:
            job_type: report.generat
            cron: "0 2 * *"
            timezone: Europe/Berln
            misfire: catch_up
            grace: 5x
            dst:
              nonexistent: shfit
              ambigous: first
            args: {when: 2026-01-01}
          month-end@invoices:
            job_type: cleanup
            rrule: "FREQ=MONTHLY;BYDAY=XX"
            every: 5m
            exclude_dates: [2026-12-31, 2026-13-01]
          ping:
            job_type: cleanup
            every: 500ms
          ping2:
            job_type: cleanup
            cron: "*/5 * * * *"
            anchor: 2026-01-01T00:00:00Z
          bad-every:
            job_type: cleanup
            every: 90
          no-rule:
            job_type: cleanup
          ping:
            job_type: cleanup
            every: 5s
        """
    assert problems(text) == [
        "f.yaml:2: defaults: unknown key 'timzone'; did you mean 'timezone'?",
        "f.yaml:3: defaults, misfire: 'coalese' is not one of catch_up | skip | coalesce;"
        " did you mean 'coalesce'?",
        "f.yaml:4: defaults: cron is a rule: it belongs to a schedule, not to defaults",
        "f.yaml:7: job type 'report.generate', handler: 'myapp.reports.generate' is not an"
        " import path like myapp.reports:generate",
        "f.yaml:8: job type 'report.generate', pool: 're ports': use letters, digits, '_',"
        " '-' and '.' only",
        "f.yaml:9: job type 'report.generate', timeout: bad duration 10: write it with a unit,"
        " like 90s, 5m, 2h, 1d or 1h30m",
        "f.yaml:11: duplicate key 'lease' (first at line 10)",
        "f.yaml:12: job type 'report.generate', max_attempts: must be between 1 and 1,000, got 0",
        "f.yaml:13: job type 'report.generate', backoff: unknown key 'mx'; did you mean 'max'?",
        "f.yaml:14: job type 'report.generate', idempotent: expected true or false, got str 'yes'",
        "f.yaml:16: job type 'cleanup', command: expected a non-empty list of strings,"
        ' like ["/usr/bin/env", "sh"]',
        "f.yaml:16: job type 'cleanup': handler and command both given; keep exactly one",
        "f.yaml:18: job type 'nothing': expected a mapping with handler or command",
        "f.yaml:21: schedule 'nightly-report', job_type: unknown job type 'report.generat';"
        " did you mean 'report.generate'? (declare it under job_types)",
        "f.yaml:22: schedule 'nightly-report', cron: bad cron '0 2 * *': 4 fields; cron needs 5"
        " (minute hour day-of-month month day-of-week) or 6 with seconds first",
        "f.yaml:23: schedule 'nightly-report', timezone: unknown time zone 'Europe/Berln';"
        " did you mean 'Europe/Berlin'?",
        "f.yaml:25: schedule 'nightly-report', grace: bad duration '5x': use a number and a unit"
        " (ms, s, m, h, d), like 500ms, 90s, 5m, 2h, 1d or 1h30m",
        "f.yaml:27: schedule 'nightly-report', dst.nonexistent: 'shfit' is not one of"
        " shift | skip; did you mean 'shift'?",
        "f.yaml:28: schedule 'nightly-report', dst: unknown key 'ambigous';"
        " did you mean 'ambiguous'?",
        "f.yaml:29: schedule 'nightly-report', args: must be JSON:"
        " date datetime.date(2026, 1, 1) is not a JSON value (quote it)",
        "f.yaml:30: schedule 'month-end@invoices': a name must not contain '@'"
        " (occurrence keys are name@instant)",
        "f.yaml:33: schedule 'month-end@invoices': rrule and every both given; keep exactly one",
        "f.yaml:34: schedule 'month-end@invoices', exclude_dates: '2026-13-01' is not a valid"
        " value: month must be in 1..12",
        "f.yaml:37: schedule 'ping', every: every 500ms: use a whole number of seconds,"
        " at least 1s",
        "f.yaml:41: schedule 'ping2': anchor only applies to every: rules",
        "f.yaml:44: schedule 'bad-every', every: bad duration 90: write it with a unit,"
        " like 90s, 5m, 2h, 1d or 1h30m",
        "f.yaml:45: schedule 'no-rule': needs one of cron, rrule or every",
        "f.yaml:47: duplicate key 'ping' (first at line 35)",
    ]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "job_type: work\ncron: '61 * * * *'\n",
            "f.yaml:7: schedule 's', cron: bad cron '61 * * * *': minute 61 is out of range (0-59)",
        ),
        (
            "job_type: work\ncron: '0 0 0 2 * * 2026'\n",
            "f.yaml:7: schedule 's', cron: bad cron '0 0 0 2 * * 2026': 7 fields; cron needs 5"
            " (minute hour day-of-month month day-of-week) or 6 with seconds first",
        ),
        (
            "job_type: work\nrrule: FREQ=FORTNIGHTLY\n",
            "f.yaml:7: schedule 's', rrule: bad rrule 'FREQ=FORTNIGHTLY': FREQ must be one of"
            " YEARLY, MONTHLY, WEEKLY, DAILY, HOURLY, MINUTELY, SECONDLY",
        ),
        (
            "job_type: work\ncron: '0 0 * * *'\nrrule: FREQ=DAILY\n",
            "f.yaml:8: schedule 's': cron and rrule both given; keep exactly one",
        ),
        (
            "job_type: work\nevery: 1m\nanchor: yesterday\n",
            "f.yaml:8: schedule 's', anchor: bad instant 'yesterday': use ISO-8601,"
            " like 2026-03-29T01:00:00Z",
        ),
        (
            "job_type: work\nevery: 1m\nanchor: 2026-01-01T00:00:00.5Z\n",
            "f.yaml:8: schedule 's', anchor: anchor must be a whole second",
        ),
        (
            "job_type: work\nevery: 0s\n",
            "f.yaml:7: schedule 's', every: must be longer than 0s",
        ),
        (
            "job_type: work\ncron: '0 0 * * *'\noverlap: never\n",
            "f.yaml:8: schedule 's', overlap: 'never' is not one of allow | forbid | replace",
        ),
        (
            "job_type: work\ncron: '0 0 * * *'\ndst: {ambiguous: twice}\n",
            "f.yaml:8: schedule 's', dst.ambiguous: 'twice' is not one of first | last | both",
        ),
        (
            "job_type: work\ncron: '0 0 * * *'\nmisfire: 1\n",
            "f.yaml:8: schedule 's', misfire: expected one of catch_up | skip | coalesce,"
            " got int 1",
        ),
        (
            "job_type: work\ncron: '0 0 * * *'\ndst: shift\n",
            "f.yaml:8: schedule 's', dst: expected a mapping with nonexistent, ambiguous",
        ),
        (
            "job_type: work\nevery: 1m\ndst: {nonexistent: skip}\n",
            "f.yaml:8: schedule 's': dst only applies to a calendar rule (cron or rrule)",
        ),
        (
            "job_type: work\ncron: '0 0 * * *'\nexclude_dates: 2026-12-31\n",
            "f.yaml:8: schedule 's', exclude_dates: expected a list of dates,"
            " like [2026-12-24, 2026-12-31]",
        ),
        (
            "job_type: work\ncron: '0 0 * * *'\nexclude_dates: [2026-12-31T00:00:00Z]\n",
            "f.yaml:8: schedule 's', exclude_dates: datetime datetime.datetime(2026, 12, 31,"
            " 0, 0, tzinfo=datetime.timezone.utc) is not a date like 2026-12-31",
        ),
        (
            "job_type: work\ncron: '0 0 * * *'\nargs: [1, 2]\n",
            "f.yaml:8: schedule 's', args: expected a mapping, like {region: eu}",
        ),
        (
            "job_type: work\ncron: '0 0 * * *'\nargs: {1: a}\n",
            "f.yaml:8: schedule 's', args: must be JSON: key 1 is not a string (quote it)",
        ),
        (
            "job_type: work\ncron: '0 0 * * *'\nargs: {x: .nan}\n",
            "f.yaml:8: schedule 's', args: must be JSON: nan is not a JSON number",
        ),
        (
            "job_type: work\ncron: '0 0 * * *'\ntimezone: europe/berlin\n",
            "f.yaml:8: schedule 's', timezone: unknown time zone 'europe/berlin';"
            " did you mean 'Europe/Berlin'?",
        ),
        (
            "job_type: work\ncron: '0 0 * * *'\ntimezone: Mars/Olympus\n",
            "f.yaml:8: schedule 's', timezone: unknown time zone 'Mars/Olympus'"
            " (use an IANA name like Europe/Berlin)",
        ),
        (
            "job_type: work\ncron: 0\n",
            "f.yaml:7: schedule 's', cron: expected a string, got int 0 (quote it)",
        ),
        (
            "job_type: work\ncron:\n",
            "f.yaml:7: schedule 's', cron: needs a value",
        ),
        (
            "cron: '0 0 * * *'\n",
            "f.yaml:5: schedule 's': needs a job_type",
        ),
        (
            "job_type: wrok\ncron: '0 0 * * *'\n",
            "f.yaml:6: schedule 's', job_type: unknown job type 'wrok'; did you mean 'work'?"
            " (declare it under job_types)",
        ),
        (
            "job_type: work\ncron: '0 0 * * *'\ntimezon: UTC\n",
            "f.yaml:8: schedule 's': unknown key 'timezon'; did you mean 'timezone'?",
        ),
        (
            "job_type: work\ncron: '0 0 * * *'\ncolor: red\n",
            "f.yaml:8: schedule 's': unknown key 'color' (expected one of: job_type, cron, rrule,"
            " every, anchor, timezone, misfire, grace, catch_up_window, dst, jitter, overlap,"
            " payload_ref, args, exclude_dates, deadline)",
        ),
        (
            "job_type: work\ncron: '0 0 * * *'\ndeadline: 500ms\n",
            "f.yaml:8: schedule 's', deadline: must be at least 1s",
        ),
        (
            "job_type: work\ncron: '0 0 * * *'\ndeadline: 0s\n",
            "f.yaml:8: schedule 's', deadline: must be at least 1s",
        ),
        (
            "job_type: work\ncron: '0 0 * * *'\ndeadline: 367d\n",
            "f.yaml:8: schedule 's', deadline: must be at most 366d",
        ),
        (
            "job_type: work\ncron: '0 0 * * *'\ndeadline: 45\n",
            "f.yaml:8: schedule 's', deadline: bad duration 45: write it with a unit, like 90s,"
            " 5m, 2h, 1d or 1h30m",
        ),
    ],
)
def test_schedule_problem(body: str, expected: str) -> None:
    assert problems(with_schedule(body)) == [expected]


@pytest.mark.parametrize(
    ("job_type", "expected"),
    [
        ("{}", "f.yaml:2: job type 'w': needs a handler (module:function) or a command (a list)"),
        (
            "{command: sh -c true}",
            'f.yaml:2: job type \'w\', command: expected a non-empty list of strings, like ["/usr/bin/env", "sh"]',  # noqa: E501
        ),
        ("{command: [sh, 1]}", "f.yaml:2: job type 'w', command: int 1 is not a string (quote it)"),
        (
            "{handler: 'm:f', backoff: {base: 1h, max: 1m}}",
            "f.yaml:2: job type 'w', backoff: base is longer than max",
        ),
        (
            "{handler: 'm:f', backoff: {base: 1s, max: 1m, jitter: 1.5}}",
            "f.yaml:2: job type 'w', backoff.jitter: must be between 0 and 1 (a fraction of the"
            " delay), got 1.5",
        ),
        (
            "{handler: 'm:f', backoff: {jitter: -0.1}}",
            "f.yaml:2: job type 'w', backoff.jitter: must be between 0 and 1 (a fraction of the"
            " delay), got -0.1",
        ),
        (
            "{handler: 'm:f', backoff: {jitter: .nan}}",
            "f.yaml:2: job type 'w', backoff.jitter: must be between 0 and 1 (a fraction of the"
            " delay), got nan",
        ),
        (
            "{handler: 'm:f', backoff: {jitter: 20%}}",
            "f.yaml:2: job type 'w', backoff.jitter: expected a number from 0 to 1 (0.2 adds up"
            " to 20 % of the delay), got str '20%'",
        ),
        (
            "{handler: 'm:f', backoff: {jitter: true}}",
            "f.yaml:2: job type 'w', backoff.jitter: expected a number from 0 to 1 (0.2 adds up"
            " to 20 % of the delay), got bool True",
        ),
        ("{handler: 'm:f', lease: 0s}", "f.yaml:2: job type 'w', lease: must be longer than 0s"),
        (
            "{handler: 'm:f', max_attempts: true}",
            "f.yaml:2: job type 'w', max_attempts: expected a whole number, got bool True",
        ),
        (
            "{handler: 'm:f', reconcile: 'not a path'}",
            "f.yaml:2: job type 'w', reconcile: 'not a path' is not an import path"
            " like myapp.reports:generate",
        ),
        (
            "{handler: 'm:f', tries: 3}",
            "f.yaml:2: job type 'w': unknown key 'tries' (expected one of: handler, command,"
            " pool, timeout, lease, max_attempts, backoff, idempotent, reconcile, priority,"
            " max_queued, max_queue_age, shed_below_priority, retain, isolation)",
        ),
    ],
)
def test_job_type_problem(job_type: str, expected: str) -> None:
    assert problems(f"job_types:\n  w: {job_type}\n") == [expected]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "f.yaml:1: the file is empty: expected a mapping with job_types and schedules"),
        (
            "# only a comment\n",
            "f.yaml:1: the file is empty: expected a mapping with job_types and schedules",
        ),
        ("- a\n- b\n", "f.yaml:1: expected a mapping with job_types and schedules at the top"),
        (
            "schedules: {}\n---\nschedules: {}\n",
            "f.yaml:3: more than one YAML document: put everything in one",
        ),
        ("schedules: [a]\n", "f.yaml:1: schedules: expected a mapping"),
        ("schedule: {}\n", "f.yaml:1: the file: unknown key 'schedule'; did you mean 'schedules'?"),
        (
            "schedules:\n  a:\n    cron: * * * * *\n",
            "f.yaml:3: bad YAML: a value starting with * or & is read as an alias or an"
            ' anchor (quote it, like cron: "*/15 * * * *")',
        ),
        (
            "schedules:\n  a: 1\n b: 2\n",
            "f.yaml:3: bad YAML: while parsing a block mapping did not find expected key",
        ),
        (
            "job_types:\n  1: {handler: 'm:f'}\n",
            "f.yaml:2: job_types: a key must be a string, not '1' (quote it)",
        ),
        (
            "schedules:\n  a: every minute\n",
            "f.yaml:2: schedule 'a': expected a mapping with job_type and cron, rrule or every",
        ),
        (
            "job_types:\n  w: {handler: 'm:f'}\nschedules:\n  s:\n    job_type: w\n    every: 1m\n"
            "    args:\n      k: 1\n      k: 2\n",
            "f.yaml:9: duplicate key 'k' (first at line 8)",
        ),
    ],
)
def test_file_problem(text: str, expected: str) -> None:
    assert problems(text) == [expected]


def test_an_empty_job_types_section_declares_none() -> None:
    assert problems("job_types: {}\nschedules:\n  s: {job_type: w, every: 1m}\n") == [
        "f.yaml:3: schedule 's', job_type: unknown job type 'w' (declare it under job_types)"
    ]


def test_without_a_job_types_section_stored_job_types_may_be_named() -> None:
    """`rota apply` checks those against the database (tests/scheduler/test_apply.py)."""
    sf = load_schedule_text("schedules:\n  s:\n    every: 1m\n    job_type: w\n", "f.yaml")
    assert sf.schedules["s"].job_type == "w"
    assert dict(sf.stored_job_type_lines) == {"s": 4}


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as missing:
        load_schedule_file(tmp_path / "nope.yaml")
    assert missing.value.problems == (
        Problem(str(tmp_path / "nope.yaml"), 1, "cannot read the file: No such file or directory"),
    )
    with pytest.raises(ConfigError, match="cannot read the file: it is a directory, not a file"):
        load_schedule_file(tmp_path)
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match="the file is not UTF-8 text"):
        load_schedule_file(binary)


def test_load_from_a_path(tmp_path: Path) -> None:
    path = tmp_path / "schedules.yaml"
    path.write_text(CONTRACT_EXAMPLE)
    f = load_schedule_file(path)
    assert f.path == str(path)
    assert len(f.schedules) == 3


def test_backoff_jitter_is_read_and_its_problems_are_at_their_line() -> None:
    sf = load_schedule_text(
        "job_types:\n  w:\n    handler: m:f\n    backoff: {base: 5s, max: 15m, jitter: 0.5}\n",
        "f.yaml",
    )
    assert sf.job_types["w"].backoff == Backoff(
        base=timedelta(seconds=5), max=timedelta(minutes=15), jitter=0.5
    )
    assert load_schedule_text("job_types:\n  w: {handler: 'm:f'}\n", "f.yaml").job_types[
        "w"
    ].backoff == Backoff(jitter=0.2)
    body = "job_types:\n  w:\n    handler: m:f\n    backoff:\n      base: 5s\n      jitter: 2\n"
    assert problems(body) == [
        "f.yaml:6: job type 'w', backoff.jitter: must be between 0 and 1 (a fraction of the"
        " delay), got 2"
    ]


@pytest.mark.parametrize("name", [".", "..", '"."', '".."'])
def test_schedule_names_a_url_path_cannot_carry_are_refused(name: str) -> None:
    """The API and the dashboard put a schedule's name in a URL path segment
    (percent-encoded); `.` and `..` stay as they are there, and every HTTP client
    resolves them as dot segments (`/schedules/..` is `/`)."""
    text = f"""\
        job_types:
          work: {{handler: m:f}}
        schedules:
          ok: {{job_type: work, every: 1h}}
          {name}:
            job_type: work
            every: 1h
        """
    shown = name.strip('"')
    assert problems(text) == [
        f"f.yaml:5: schedule {shown!r}: a name must not be '.' or '..' "
        "(a URL path cannot carry it: /schedules/.. is /)"
    ]


def test_other_odd_schedule_names_are_kept() -> None:
    odd = ["...", ".a", "a.", "a/..", "../a", "%2e", "a?b", "a#b", "x/pause"]
    body = "".join(f"  {n!r}: {{job_type: work, every: 1h}}\n" for n in odd)
    loaded = load("job_types:\n  work: {handler: m:f}\nschedules:\n" + body)
    assert list(loaded.schedules) == odd


def test_a_deadline_is_stored_and_a_schedule_without_one_keeps_its_definition() -> None:
    sf = load(with_schedule("job_type: work\ncron: '0 0 * * *'\ndeadline: 1h30m\n"))
    s = sf.schedules["s"]
    assert s.deadline == timedelta(hours=1, minutes=30)
    assert s.to_json()["deadline"] == "1h30m"
    assert ScheduleSpec.from_json(s.to_json()) == s
    plain = load(with_schedule("job_type: work\ncron: '0 0 * * *'\n")).schedules["s"]
    assert plain.deadline is None and "deadline" not in plain.to_json()
    # A deadline decides no fire instant: changing it keeps the cursor on apply.
    assert plain.rule_hash() == s.rule_hash() and plain.definition_hash() != s.definition_hash()
