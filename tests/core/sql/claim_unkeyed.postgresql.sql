-- Rendered by tests/core/test_sql_snapshots.py (ROTA_UPDATE_SQL=1 rewrites it).
CREATE FUNCTION rota_claim_unkeyed_36186315c867(p_owner text, p_pools text[], p_limit integer, p_now timestamptz, p_excluded_types text[], p_head_below bigint, p_start_priority integer, p_start_run_after timestamptz, p_start_created_at timestamptz)
RETURNS TABLE (waiting boolean, job_id uuid, job_type varchar, pool varchar, lease_generation bigint, attempt_count integer, max_attempts integer, lease_seconds double precision, idempotent boolean, needs_reconcile boolean, payload_ref text, args json, scheduled_for timestamptz, covers_from timestamptz, covers_count integer, last_error_code varchar, tenant varchar, concurrency_key varchar, schedule_name varchar, run_after timestamptz, created_at timestamptz, started_at timestamptz, priority integer)
LANGUAGE plpgsql AS $rota$
#variable_conflict use_column
BEGIN
RETURN QUERY WITH keyed AS MATERIALIZED (
    SELECT EXISTS (
        SELECT 1 FROM jobs w
        WHERE w.state IN ('QUEUED', 'RETRY_WAIT')
          AND w.concurrency_key IS NOT NULL
          AND w.pool = ANY(CAST(p_pools AS text[]))
          AND NOT (w.job_type = ANY(CAST(p_excluded_types AS text[])))
          AND w.run_after <= coalesce(CAST(p_now AS timestamptz), now())
          AND w.attempt_count < w.max_attempts
          AND NOT EXISTS (
                SELECT 1 FROM jobs k
                WHERE k.concurrency_key = w.concurrency_key AND k.state IN ('RUNNING', 'CANCEL_REQUESTED'))) AS waiting),
        picked AS (
            SELECT u.job_id, u.lease_generation FROM (
                SELECT h.* FROM unnest(CAST(p_pools AS text[])) AS p(pool)
                CROSS JOIN LATERAL (
            SELECT c.job_id, c.lease_generation, c.priority, c.run_after, c.created_at
            FROM jobs c
            WHERE c.state IN ('QUEUED', 'RETRY_WAIT')
              AND c.concurrency_key IS NULL
              AND c.pool = p.pool
              AND NOT (c.job_type = ANY(CAST(p_excluded_types AS text[])))
              AND c.run_after <= coalesce(CAST(p_now AS timestamptz), now())
              AND c.attempt_count < c.max_attempts
              AND NOT (SELECT waiting FROM keyed)
              AND c.priority < CAST(p_head_below AS bigint)
            ORDER BY priority, run_after, created_at
            LIMIT p_limit
            FOR UPDATE OF c SKIP LOCKED
                ) AS h
                UNION ALL
                SELECT s.* FROM unnest(CAST(p_pools AS text[])) AS p(pool)
                CROSS JOIN LATERAL (
            SELECT c.job_id, c.lease_generation, c.priority, c.run_after, c.created_at
            FROM jobs c
            WHERE c.state IN ('QUEUED', 'RETRY_WAIT')
              AND c.concurrency_key IS NULL
              AND c.pool = p.pool
              AND NOT (c.job_type = ANY(CAST(p_excluded_types AS text[])))
              AND c.run_after <= coalesce(CAST(p_now AS timestamptz), now())
              AND c.attempt_count < c.max_attempts
              AND NOT (SELECT waiting FROM keyed)
              AND (c.priority, c.run_after, c.created_at) >= (CAST(p_start_priority AS integer), CAST(p_start_run_after AS timestamptz), CAST(p_start_created_at AS timestamptz))
            ORDER BY priority, run_after, created_at
            LIMIT p_limit
            FOR UPDATE OF c SKIP LOCKED
                ) AS s
            ) AS u
            ORDER BY priority, run_after, created_at
            LIMIT p_limit
        ),
        claimed AS (
            UPDATE jobs AS j
            SET state = 'RUNNING',
                lease_owner = p_owner,
                lease_expires_at = (coalesce(CAST(p_now AS timestamptz), now()) + make_interval(secs => CAST(j.lease_seconds AS double precision))),
                lease_generation = j.lease_generation + 1,
                attempt_count = j.attempt_count + 1,
                started_at = coalesce(CAST(p_now AS timestamptz), now()),
                heartbeat_at = coalesce(CAST(p_now AS timestamptz), now()),
                updated_at = coalesce(CAST(p_now AS timestamptz), now())
            FROM picked
            WHERE j.job_id = picked.job_id
              AND j.lease_generation = picked.lease_generation
            RETURNING j.*
        ),
        opened AS (
            INSERT INTO job_attempts (job_id, attempt, lease_generation, worker_id, started_at)
            SELECT job_id, attempt_count, lease_generation, p_owner, started_at FROM claimed
        )
        SELECT keyed.waiting, claimed.job_id, claimed.job_type, claimed.pool, claimed.lease_generation, claimed.attempt_count, claimed.max_attempts, claimed.lease_seconds, claimed.idempotent, claimed.needs_reconcile, claimed.payload_ref, claimed.args, claimed.scheduled_for, claimed.covers_from, claimed.covers_count, claimed.last_error_code, claimed.tenant, claimed.concurrency_key, claimed.schedule_name, claimed.run_after, claimed.created_at, claimed.started_at, claimed.priority
        FROM keyed LEFT JOIN claimed ON TRUE
        ORDER BY claimed.priority, claimed.run_after, claimed.created_at;
END
$rota$;

SELECT * FROM rota_claim_unkeyed_36186315c867(CAST(:owner AS text), CAST(:pools AS text[]), CAST(:limit AS integer), CAST(:now AS timestamptz), CAST(:excluded_types AS text[]), CAST(:head_below AS bigint), CAST(:start_priority AS integer), CAST(:start_run_after AS timestamptz), CAST(:start_created_at AS timestamptz));
