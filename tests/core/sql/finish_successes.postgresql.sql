-- Rendered by tests/core/test_sql_snapshots.py (ROTA_UPDATE_SQL=1 rewrites it).
WITH b AS MATERIALIZED (
    SELECT *, CAST(:owner AS text) AS owner, TRUE AS leased
    FROM unnest(CAST(:ids AS uuid[]), CAST(:gens AS bigint[])) AS b(job_id, gen)
),
done AS (
    UPDATE jobs AS j
    SET state = 'SUCCEEDED',
        lease_owner = NULL,
        lease_expires_at = NULL,
        needs_reconcile = FALSE,
        finished_at = coalesce(CAST(:now AS timestamptz), now()),
        updated_at = coalesce(CAST(:now AS timestamptz), now())
    FROM b
    WHERE j.job_id = b.job_id
  AND j.lease_generation = b.gen
  AND j.lease_owner = b.owner
  AND (j.state IN ('RUNNING', 'CANCEL_REQUESTED')) = b.leased
    RETURNING j.job_id, j.lease_generation, j.state
),
closed AS (
    UPDATE job_attempts AS a
    SET ended_at = coalesce(CAST(:now AS timestamptz), now()), outcome = 'SUCCEEDED', error_code = NULL, error_detail = NULL
    FROM done
    WHERE a.job_id = done.job_id AND a.lease_generation = done.lease_generation
)
SELECT job_id, lease_generation, state FROM done;
