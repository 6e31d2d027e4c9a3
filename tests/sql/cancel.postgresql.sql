-- Rendered by tests/test_sql_snapshots.py (ROTA_UPDATE_SQL=1 rewrites it).
UPDATE jobs
SET state = CASE WHEN state = 'RUNNING' THEN 'CANCEL_REQUESTED' ELSE 'CANCELLED' END,
    cancel_requested_at = coalesce(CAST(:now AS timestamptz), now()),
    finished_at = CASE WHEN state = 'RUNNING' THEN finished_at ELSE coalesce(CAST(:now AS timestamptz), now()) END,
    updated_at = coalesce(CAST(:now AS timestamptz), now())
WHERE job_id = :job_id AND state IN ('QUEUED', 'RETRY_WAIT', 'RUNNING')
RETURNING state, job_type, created_at, finished_at, cancel_requested_at;
