r"""The scheduler: rules -> occurrences -> job rows.

A schedule (``schedules`` row) fires at the instants its rule produces
(``scheduler.rules``: cron, RRULE or a fixed interval, in a time zone, with a
DST policy). Each instant is an *occurrence*; each occurrence becomes at most
one job row. The replicas read the definitions from the database
(``schedules.definition``, stored by ``rota apply``), never from the file, so a
rolling deploy with two file versions cannot make them disagree.

Keys
    A job made for an occurrence carries ``dedup_key = "<name>@<instant>"``, the
    nominal instant in UTC as ``YYYY-MM-DDTHH:MM:SSZ`` (before jitter), and
    ``scheduled_for`` = that instant. The unique index on ``(job_type,
    dedup_key)`` makes a second insert of the same occurrence a no-op
    (``ON CONFLICT DO NOTHING``): a conflict is normal, counted and logged as
    ``occurrence_conflict``, never an error. ``rota backfill`` uses the same
    keys, so it cannot duplicate what the scheduler made (or the reverse). A
    manual run (``rota trigger``) is keyed ``"<name>@manual:<UTC now with
    microseconds>Z"``: the ``manual:`` prefix can never equal a regular key.

Cursor
    ``cursor_at`` is the high-water mark: the newest nominal instant already
    handled (made into a job, skipped or coalesced). ``next_fire_at`` is the
    first occurrence strictly after it. Both move only in the transaction that
    inserts the jobs and ledger rows for the occurrences they pass, so a crash
    loses or duplicates nothing. Job rows are never consulted to decide what is
    due: pruning finished jobs cannot reopen an occurrence.

Replicas
    A tick locks a batch of due schedules (``next_fire_at <= now``, via the
    partial index ``ix_schedules_due``, so its cost follows the due schedules,
    not all of them) with ``FOR UPDATE SKIP LOCKED`` on PostgreSQL; on SQLite
    every transaction begins with ``BEGIN IMMEDIATE`` and the write lock
    serialises the replicas. The batch's jobs go in one INSERT ... ON CONFLICT
    DO NOTHING RETURNING (``insert_jobs_or_skip``, the statement every
    producer uses) and its cursors move in one UPDATE guarded by the
    ``next_fire_at`` it read (``advance_cursors_if_unchanged``). Leadership is
    never the guard: any number of replicas may run, and the unique key plus
    the locked cursor make every occurrence one job. Between ticks a replica
    sleeps until the earliest ``next_fire_at`` (at most ``max_sleep``, 1 s by
    default) and wakes at once on PostgreSQL ``NOTIFY rota_schedules``, sent
    by apply, pause, resume and trigger; SQLite replicas notice such changes
    within ``max_sleep``. A schedule that cannot be evaluated or whose jobs the
    database refuses is set aside with its reason (``schedules.set_aside_reason``,
    shown by ``rota schedules``), logged once (``schedule_failed``) and looked at
    again a minute later; it never stops the other schedules.

Misfires (``scheduler.misfire``, pure)
    An occurrence is late when ``now - instant > grace`` as the tick reaches it.

    * ``catch_up``: every occurrence within ``catch_up_window`` runs, oldest
      first, at most ``max_jobs`` per transaction (the cursor advances with
      each batch); older ones are recorded as one ``misfire`` range.
    * ``skip``: late occurrences are recorded as one ``misfire`` range; on-time
      ones run.
    * ``coalesce``: when any due occurrence is late, one job for all of them,
      keyed by the newest (``scheduled_for``), with ``covers_from`` (oldest)
      and ``covers_count``; the folded ones are recorded as ``coalesced``.

    Skipped ranges are counted without running through them one by one where
    the rule allows: a fixed interval is plain arithmetic, and a cron rule in
    a fixed-offset zone (UTC) repeats exactly every minute, hour, day or week,
    so one period is walked and multiplied. A year-long outage of a
    per-minute schedule costs one ledger row and milliseconds, not a year of
    work. Other calendar rules (DST zones, RRULE) are walked one occurrence
    at a time.

Ledger
    ``schedule_skips`` keeps one row per skipped or folded range: reason
    (``misfire``, ``dst``, ``overlap``, ``paused``, ``coalesced``), first and
    last instant, count, and for ``coalesced`` the covering job.
    ``schedules.skipped_count`` / ``coalesced_count`` keep the totals, shown by
    ``rota schedules``. So every occurrence is accounted for:
    jobs + skipped + coalesced.

Other policies
    * ``jitter`` (``scheduler.jitter``): ``run_after = instant + offset``, the
      offset a hash of the occurrence key: every replica computes the same.
    * ``overlap`` (``scheduler.overlap``): ``forbid`` skips an occurrence while
      a previous run of the schedule is unfinished (reason ``overlap``);
      ``replace`` asks the unfinished runs to cancel (as ``rota cancel``) and
      makes the new one.
    * DST: an occurrence the rule engine marks ``skipped`` (a wall time in a
      gap under ``nonexistent: skip``) is recorded as a ``dst`` range.

Apply (``scheduler.apply``); pause and resume (``rota.operations.schedules``)
    ``rota apply`` makes the table match the file in one transaction. A changed
    rule (or a revived schedule) starts from ``max(now, cursor)``: the past is
    never replayed under the new rule. A removed schedule keeps its row and its
    pending jobs, and stops firing. Pausing stops materialisation; resuming
    applies the schedule's misfire policy to the occurrences that fell in the
    pause, recording skipped ones with reason ``paused`` (``catch_up`` runs
    those within its window, ``coalesce`` makes one job, ``skip`` runs none).

Deadlines (``scheduler.deadlines``)
    After each tick a replica judges the occurrences of schedules with a
    ``deadline`` whose deadline passed since the schedule's watermark, a
    bounded batch per transaction, and records the late ones once each
    (``late_occurrences``, unique per schedule and instant).

May import: ``rota.producer``, ``rota.runtime``, ``rota.migrations`` and
``rota.core``; never ``rota.executor`` (its sibling) or anything above.
"""
