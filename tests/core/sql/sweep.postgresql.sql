-- Rendered by tests/core/test_sql_snapshots.py (ROTA_UPDATE_SQL=1 rewrites it).
WITH expired AS (
    SELECT job_id FROM jobs WHERE state IN ('RUNNING', 'CANCEL_REQUESTED') AND lease_expires_at <= coalesce(CAST(:now AS timestamptz), now())
    LIMIT 1000
    FOR UPDATE SKIP LOCKED
),
swept AS (
    UPDATE jobs SET
    state = CASE WHEN state = 'CANCEL_REQUESTED' THEN 'CANCELLED'
                 WHEN attempt_count >= max_attempts THEN 'FAILED'
                 ELSE 'RETRY_WAIT' END,
    run_after = coalesce(CAST(:now AS timestamptz), now()),
    last_error_code = 'LEASE_EXPIRED',
    last_error_detail = 'the lease of ' || lease_owner || ' (generation ' || lease_generation || ') expired at ' || lease_expires_at || ' with no report',
    needs_reconcile = CASE WHEN state = 'RUNNING' AND NOT idempotent THEN TRUE
                           ELSE needs_reconcile END,
    finished_at = CASE WHEN state = 'CANCEL_REQUESTED' OR attempt_count >= max_attempts
                       THEN coalesce(CAST(:now AS timestamptz), now()) ELSE NULL END,
    lease_owner = NULL,
    lease_expires_at = NULL,
    updated_at = coalesce(CAST(:now AS timestamptz), now())
    WHERE job_id IN (SELECT job_id FROM expired) AND state IN ('RUNNING', 'CANCEL_REQUESTED') AND lease_expires_at <= coalesce(CAST(:now AS timestamptz), now())
    RETURNING job_id, lease_generation, state, attempt_count, last_error_detail,
              job_type, created_at, finished_at, cancel_requested_at
),
closed AS (
    UPDATE job_attempts AS a
    SET ended_at = coalesce(CAST(:now AS timestamptz), now()), outcome = 'LEASE_EXPIRED', error_code = 'LEASE_EXPIRED'
    FROM swept
    WHERE a.job_id = swept.job_id AND a.lease_generation = swept.lease_generation
      AND a.ended_at IS NULL
)
SELECT * FROM swept;
