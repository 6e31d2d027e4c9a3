-- Rendered by tests/core/test_sql_snapshots.py (ROTA_UPDATE_SQL=1 rewrites it).
SELECT pg_advisory_xact_lock(:key);

WITH picked AS (
SELECT r.job_id, r.lease_generation FROM (
    SELECT cand.*,
           row_number() OVER (PARTITION BY concurrency_key ORDER BY priority, run_after, created_at) AS key_rn,
           row_number() OVER (PARTITION BY tenant ORDER BY priority, run_after, created_at) AS tenant_rn
    FROM (
SELECT c.job_id, c.lease_generation, c.priority, c.run_after, c.created_at, c.tenant,
       c.concurrency_key
FROM jobs c
WHERE c.state IN ('QUEUED', 'RETRY_WAIT')
  AND c.pool = :pool0
  AND NOT (c.job_type = ANY(CAST(:excluded_types AS text[])))
  AND c.run_after <= coalesce(CAST(:now AS timestamptz), now())
  AND c.attempt_count < c.max_attempts
  AND (c.concurrency_key IS NULL OR NOT EXISTS (
        SELECT 1 FROM jobs k
        WHERE k.concurrency_key = c.concurrency_key AND k.state IN ('RUNNING', 'CANCEL_REQUESTED')))
  AND (c.tenant IS NULL OR CAST(:tenant_limit AS integer) IS NULL OR (
        SELECT count(*) FROM jobs t
        WHERE t.tenant = c.tenant AND t.state IN ('RUNNING', 'CANCEL_REQUESTED')) < CAST(:tenant_limit AS integer))
ORDER BY priority, run_after, created_at
LIMIT :scan
FOR UPDATE OF c SKIP LOCKED) AS cand
) AS r
WHERE (r.concurrency_key IS NULL OR r.key_rn = 1)
  AND (r.tenant IS NULL OR CAST(:tenant_limit AS integer) IS NULL
       OR r.tenant_rn <= CAST(:tenant_limit AS integer) - (
        SELECT count(*) FROM jobs t
        WHERE t.tenant = r.tenant AND t.state IN ('RUNNING', 'CANCEL_REQUESTED')))
ORDER BY priority, run_after, created_at
LIMIT :limit),
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
SELECT job_id, job_type, pool, lease_generation, attempt_count, max_attempts, lease_seconds, idempotent, needs_reconcile, payload_ref, args, scheduled_for, covers_from, covers_count, last_error_code, tenant, concurrency_key, schedule_name, run_after, created_at, started_at, priority FROM claimed
ORDER BY priority, run_after, created_at;
