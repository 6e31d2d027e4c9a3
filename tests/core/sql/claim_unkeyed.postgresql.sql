-- Rendered by tests/core/test_sql_snapshots.py (ROTA_UPDATE_SQL=1 rewrites it).
WITH keyed AS MATERIALIZED (
SELECT EXISTS (
    SELECT 1 FROM jobs w
    WHERE w.state IN ('QUEUED', 'RETRY_WAIT')
      AND w.concurrency_key IS NOT NULL
      AND w.pool IN (:pool0)
      AND NOT (w.job_type = ANY(CAST(:excluded_types AS text[])))
      AND w.run_after <= coalesce(CAST(:now AS timestamptz), now())
      AND w.attempt_count < w.max_attempts
      AND NOT EXISTS (
            SELECT 1 FROM jobs k
            WHERE k.concurrency_key = w.concurrency_key AND k.state IN ('RUNNING', 'CANCEL_REQUESTED'))) AS waiting),
    picked AS (
        SELECT c.job_id, c.lease_generation, c.priority, c.run_after, c.created_at
        FROM jobs c
        WHERE c.state IN ('QUEUED', 'RETRY_WAIT')
          AND c.concurrency_key IS NULL
          AND c.pool = :pool0
          AND NOT (c.job_type = ANY(CAST(:excluded_types AS text[])))
          AND c.run_after <= coalesce(CAST(:now AS timestamptz), now())
          AND c.attempt_count < c.max_attempts
          AND NOT (SELECT waiting FROM keyed)
        ORDER BY priority, run_after, created_at
        LIMIT :limit
        FOR UPDATE OF c SKIP LOCKED
    ),
    claimed AS (
        UPDATE jobs AS j
        SET state = 'RUNNING',
            lease_owner = :owner,
            lease_expires_at = (coalesce(CAST(:now AS timestamptz), now()) + make_interval(secs => CAST(j.lease_seconds AS double precision))),
            lease_generation = j.lease_generation + 1,
            attempt_count = j.attempt_count + 1,
            started_at = coalesce(CAST(:now AS timestamptz), now()),
            heartbeat_at = coalesce(CAST(:now AS timestamptz), now()),
            updated_at = coalesce(CAST(:now AS timestamptz), now())
        FROM picked
        WHERE j.job_id = picked.job_id
          AND j.lease_generation = picked.lease_generation
        RETURNING j.*
    ),
    opened AS (
        INSERT INTO job_attempts (job_id, attempt, lease_generation, worker_id, started_at)
        SELECT job_id, attempt_count, lease_generation, :owner, started_at FROM claimed
    )
    SELECT keyed.waiting, claimed.job_id, claimed.job_type, claimed.pool, claimed.lease_generation, claimed.attempt_count, claimed.max_attempts, claimed.lease_seconds, claimed.idempotent, claimed.needs_reconcile, claimed.payload_ref, claimed.args, claimed.scheduled_for, claimed.covers_from, claimed.covers_count, claimed.last_error_code, claimed.tenant, claimed.concurrency_key, claimed.schedule_name, claimed.run_after, claimed.created_at, claimed.started_at, claimed.priority
    FROM keyed LEFT JOIN claimed ON TRUE
    ORDER BY claimed.priority, claimed.run_after, claimed.created_at;
