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
              job_type, created_at, finished_at, cancel_requested_at,
              schedule_name, scheduled_for
),
closed AS (
    UPDATE job_attempts AS a
    SET ended_at = coalesce(CAST(:now AS timestamptz), now()), outcome = 'LEASE_EXPIRED', error_code = 'LEASE_EXPIRED'
    FROM swept
    WHERE a.job_id = swept.job_id AND a.lease_generation = swept.lease_generation
      AND a.ended_at IS NULL
),
recorded AS (
INSERT INTO schedule_outcomes
    (schedule_name, last_state, last_instant, last_finished_at, last_success_instant)
SELECT schedule_name, state, scheduled_for, finished_at, success FROM (
    SELECT e.schedule_name, e.state, e.scheduled_for, e.finished_at,
           row_number() OVER (PARTITION BY e.schedule_name
                              ORDER BY e.scheduled_for DESC, e.finished_at DESC) AS n,
           max(CASE WHEN e.state = 'SUCCEEDED' THEN e.scheduled_for END)
               OVER (PARTITION BY e.schedule_name) AS success
    FROM swept AS e
    WHERE e.schedule_name IS NOT NULL AND e.scheduled_for IS NOT NULL
      AND e.finished_at IS NOT NULL AND e.state IN ('SUCCEEDED', 'FAILED', 'CANCELLED')
) AS newest
WHERE n = 1
ORDER BY schedule_name
ON CONFLICT (schedule_name) DO UPDATE SET
    last_state = CASE WHEN excluded.last_instant >= schedule_outcomes.last_instant THEN excluded.last_state
                      ELSE schedule_outcomes.last_state END,
    last_finished_at = CASE WHEN excluded.last_instant >= schedule_outcomes.last_instant THEN excluded.last_finished_at
                            ELSE schedule_outcomes.last_finished_at END,
    last_instant = CASE WHEN excluded.last_instant >= schedule_outcomes.last_instant THEN excluded.last_instant
                        ELSE schedule_outcomes.last_instant END,
    last_success_instant = CASE
        WHEN schedule_outcomes.last_success_instant IS NULL
          OR excluded.last_success_instant > schedule_outcomes.last_success_instant
        THEN coalesce(excluded.last_success_instant,
                      schedule_outcomes.last_success_instant)
        ELSE schedule_outcomes.last_success_instant END
)
SELECT * FROM swept;
