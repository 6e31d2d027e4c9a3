-- Rendered by tests/core/test_sql_snapshots.py (ROTA_UPDATE_SQL=1 rewrites it).
UPDATE jobs SET
    state = CASE WHEN state = 'CANCEL_REQUESTED' THEN 'CANCELLED'
                 WHEN attempt_count >= max_attempts THEN 'FAILED'
                 ELSE 'RETRY_WAIT' END,
    run_after = coalesce(:now, strftime('%Y-%m-%d %H:%M:%f000', 'now')),
    last_error_code = 'LEASE_EXPIRED',
    last_error_detail = 'the lease of ' || lease_owner || ' (generation ' || lease_generation || ') expired at ' || lease_expires_at || ' UTC with no report',
    needs_reconcile = CASE WHEN state = 'RUNNING' AND NOT idempotent THEN TRUE
                           ELSE needs_reconcile END,
    finished_at = CASE WHEN state = 'CANCEL_REQUESTED' OR attempt_count >= max_attempts
                       THEN coalesce(:now, strftime('%Y-%m-%d %H:%M:%f000', 'now')) ELSE NULL END,
    lease_owner = NULL,
    lease_expires_at = NULL,
    updated_at = coalesce(:now, strftime('%Y-%m-%d %H:%M:%f000', 'now'))
WHERE job_id IN (SELECT job_id FROM jobs WHERE state IN ('RUNNING', 'CANCEL_REQUESTED') AND lease_expires_at <= coalesce(:now, strftime('%Y-%m-%d %H:%M:%f000', 'now')) LIMIT 1000)
  AND state IN ('RUNNING', 'CANCEL_REQUESTED') AND lease_expires_at <= coalesce(:now, strftime('%Y-%m-%d %H:%M:%f000', 'now'))
RETURNING job_id, lease_generation, state, attempt_count, last_error_detail,
              job_type, created_at, finished_at, cancel_requested_at;

UPDATE job_attempts
SET ended_at = coalesce(:now, strftime('%Y-%m-%d %H:%M:%f000', 'now')), outcome = 'LEASE_EXPIRED', error_code = 'LEASE_EXPIRED'
FROM json_each(:batch) AS b
WHERE job_attempts.job_id = json_extract(b.value, '$.id')
  AND job_attempts.lease_generation = json_extract(b.value, '$.gen')
  AND job_attempts.ended_at IS NULL;

INSERT INTO schedule_outcomes
    (schedule_name, last_state, last_instant, last_finished_at, last_success_instant)
SELECT schedule_name, state, scheduled_for, finished_at, success FROM (
    SELECT e.schedule_name, e.state, e.scheduled_for, e.finished_at,
           row_number() OVER (PARTITION BY e.schedule_name
                              ORDER BY e.scheduled_for DESC, e.finished_at DESC) AS n,
           max(CASE WHEN e.state = 'SUCCEEDED' THEN e.scheduled_for END)
               OVER (PARTITION BY e.schedule_name) AS success
    FROM (SELECT schedule_name, scheduled_for, state, finished_at FROM jobs
          WHERE job_id IN (SELECT value FROM json_each(:ids))) AS e
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
        ELSE schedule_outcomes.last_success_instant END;
