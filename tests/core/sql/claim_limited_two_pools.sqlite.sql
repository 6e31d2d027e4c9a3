-- Rendered by tests/core/test_sql_snapshots.py (ROTA_UPDATE_SQL=1 rewrites it).
UPDATE jobs
SET state = 'RUNNING',
    lease_owner = :owner,
    lease_expires_at = strftime('%Y-%m-%d %H:%M:%f000', coalesce(:now, 'now'), printf('%+.3f seconds', lease_seconds)),
    lease_generation = lease_generation + 1,
    attempt_count = attempt_count + 1,
    started_at = coalesce(:now, strftime('%Y-%m-%d %H:%M:%f000', 'now')),
    heartbeat_at = coalesce(:now, strftime('%Y-%m-%d %H:%M:%f000', 'now')),
    updated_at = coalesce(:now, strftime('%Y-%m-%d %H:%M:%f000', 'now'))
WHERE job_id IN (
SELECT r.job_id FROM (
    SELECT cand.*,
           row_number() OVER (PARTITION BY concurrency_key ORDER BY priority, run_after, created_at) AS key_rn,
           row_number() OVER (PARTITION BY tenant ORDER BY priority, run_after, created_at) AS tenant_rn
    FROM (
SELECT * FROM (
SELECT c.job_id, c.lease_generation, c.priority, c.run_after, c.created_at, c.tenant,
       c.concurrency_key
FROM jobs c
WHERE c.state IN ('QUEUED', 'RETRY_WAIT')
  AND c.pool = :pool0
  AND c.job_type NOT IN (SELECT value FROM json_each(:excluded_types))
  AND c.run_after <= coalesce(:now, strftime('%Y-%m-%d %H:%M:%f000', 'now'))
  AND c.attempt_count < c.max_attempts
  AND (c.concurrency_key IS NULL OR NOT EXISTS (
        SELECT 1 FROM jobs k
        WHERE k.concurrency_key = c.concurrency_key AND k.state IN ('RUNNING', 'CANCEL_REQUESTED')))
  AND (c.tenant IS NULL OR CAST(:tenant_limit AS integer) IS NULL OR (
        SELECT count(*) FROM jobs t
        WHERE t.tenant = c.tenant AND t.state IN ('RUNNING', 'CANCEL_REQUESTED')) < CAST(:tenant_limit AS integer))
ORDER BY priority, run_after, created_at
LIMIT :scan) AS p0
UNION ALL
SELECT * FROM (
SELECT c.job_id, c.lease_generation, c.priority, c.run_after, c.created_at, c.tenant,
       c.concurrency_key
FROM jobs c
WHERE c.state IN ('QUEUED', 'RETRY_WAIT')
  AND c.pool = :pool1
  AND c.job_type NOT IN (SELECT value FROM json_each(:excluded_types))
  AND c.run_after <= coalesce(:now, strftime('%Y-%m-%d %H:%M:%f000', 'now'))
  AND c.attempt_count < c.max_attempts
  AND (c.concurrency_key IS NULL OR NOT EXISTS (
        SELECT 1 FROM jobs k
        WHERE k.concurrency_key = c.concurrency_key AND k.state IN ('RUNNING', 'CANCEL_REQUESTED')))
  AND (c.tenant IS NULL OR CAST(:tenant_limit AS integer) IS NULL OR (
        SELECT count(*) FROM jobs t
        WHERE t.tenant = c.tenant AND t.state IN ('RUNNING', 'CANCEL_REQUESTED')) < CAST(:tenant_limit AS integer))
ORDER BY priority, run_after, created_at
LIMIT :scan) AS p1
ORDER BY priority, run_after, created_at
LIMIT :scan) AS cand
) AS r
WHERE (r.concurrency_key IS NULL OR r.key_rn = 1)
  AND (r.tenant IS NULL OR CAST(:tenant_limit AS integer) IS NULL
       OR r.tenant_rn <= CAST(:tenant_limit AS integer) - (
        SELECT count(*) FROM jobs t
        WHERE t.tenant = r.tenant AND t.state IN ('RUNNING', 'CANCEL_REQUESTED')))
ORDER BY priority, run_after, created_at
LIMIT :limit)
RETURNING job_id, job_type, pool, lease_generation, attempt_count, max_attempts, lease_seconds, idempotent, needs_reconcile, payload_ref, args, scheduled_for, covers_from, covers_count, last_error_code, tenant, concurrency_key, schedule_name, run_after, created_at, started_at, priority;
