-- Rendered by tests/test_sql_snapshots.py (ROTA_UPDATE_SQL=1 rewrites it).
UPDATE jobs
SET state = 'QUEUED',
    attempt_count = 0,
    run_after = coalesce(:now, strftime('%Y-%m-%d %H:%M:%f000', 'now')),
    needs_reconcile = FALSE,
    finished_at = NULL,
    updated_at = coalesce(:now, strftime('%Y-%m-%d %H:%M:%f000', 'now'))
WHERE job_id = :job_id AND state = 'FAILED'
RETURNING state;
