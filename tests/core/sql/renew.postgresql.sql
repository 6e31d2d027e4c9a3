-- Rendered by tests/core/test_sql_snapshots.py (ROTA_UPDATE_SQL=1 rewrites it).
WITH b AS MATERIALIZED (
    SELECT *, CAST(:owner AS text) AS owner, TRUE AS leased, coalesce(CAST(:now AS timestamptz), now()) AS now
    FROM unnest(
        CAST(:ids AS uuid[]), CAST(:gens AS bigint[]), CAST(:stages AS text[]),
        CAST(:dones AS bigint[]), CAST(:totals AS bigint[]), CAST(:outputs AS text[]),
        CAST(:dropped AS bigint[])
    ) AS b(job_id, gen, stage, done, total, output, dropped)
),
renewed AS (
    UPDATE jobs AS j SET
    lease_expires_at = (coalesce(CAST(:now AS timestamptz), now()) + make_interval(secs => CAST(j.lease_seconds AS double precision))),
    heartbeat_at = coalesce(CAST(:now AS timestamptz), now()),
    updated_at = coalesce(CAST(:now AS timestamptz), now()),
    progress_stage = coalesce(b.stage, j.progress_stage),
    progress_done = coalesce(b.done, j.progress_done),
    progress_total = coalesce(b.total, j.progress_total)
    FROM b
    WHERE j.job_id = b.job_id
  AND j.lease_generation = b.gen
  AND j.lease_owner = b.owner
  AND (j.state IN ('RUNNING', 'CANCEL_REQUESTED')) = b.leased
      AND j.lease_expires_at > b.now
    RETURNING j.job_id, j.state, j.lease_generation, b.output, b.dropped
),
kept AS (
    INSERT INTO job_attempt_output (job_id, lease_generation, output, dropped_bytes)
    SELECT job_id, lease_generation, output, dropped FROM renewed
    WHERE output IS NOT NULL
ON CONFLICT (job_id, lease_generation) DO UPDATE
SET output = excluded.output, dropped_bytes = excluded.dropped_bytes
)
SELECT job_id, state FROM renewed;
