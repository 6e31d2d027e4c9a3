-- Rendered by tests/core/test_sql_snapshots.py (ROTA_UPDATE_SQL=1 rewrites it).
WITH b AS MATERIALIZED (
    SELECT json_extract(value, '$.id') AS job_id,
           json_extract(value, '$.gen') AS gen,
           json_extract(value, '$.stage') AS stage,
           json_extract(value, '$.done') AS done,
           json_extract(value, '$.total') AS total
    FROM json_each(:batch)
)
UPDATE jobs SET
    lease_expires_at = strftime('%Y-%m-%d %H:%M:%f000', coalesce(:now, 'now'), printf('%+.3f seconds', jobs.lease_seconds)),
    heartbeat_at = coalesce(:now, strftime('%Y-%m-%d %H:%M:%f000', 'now')),
    updated_at = coalesce(:now, strftime('%Y-%m-%d %H:%M:%f000', 'now')),
    progress_stage = coalesce(b.stage, jobs.progress_stage),
    progress_done = coalesce(b.done, jobs.progress_done),
    progress_total = coalesce(b.total, jobs.progress_total)
FROM b
WHERE jobs.job_id = b.job_id
  AND jobs.lease_generation = b.gen
  AND jobs.lease_owner = :owner
  AND jobs.state IN ('RUNNING', 'CANCEL_REQUESTED')
  AND jobs.lease_expires_at > coalesce(:now, strftime('%Y-%m-%d %H:%M:%f000', 'now'))
RETURNING jobs.job_id, jobs.state, jobs.lease_generation;

INSERT INTO job_attempt_output (job_id, lease_generation, output, dropped_bytes)
SELECT json_extract(value, '$.id'), json_extract(value, '$.gen'),
       json_extract(value, '$.output'), json_extract(value, '$.dropped')
FROM json_each(:batch) WHERE true
    ON CONFLICT (job_id, lease_generation) DO UPDATE
    SET output = excluded.output, dropped_bytes = excluded.dropped_bytes;
