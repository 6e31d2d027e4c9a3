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
