-- Rendered by tests/core/test_sql_snapshots.py (ROTA_UPDATE_SQL=1 rewrites it).
INSERT INTO jobs (state, attempt_count, run_after, created_at, updated_at) VALUES (?, ?, coalesce(?, strftime('%Y-%m-%d %H:%M:%f000', 'now')), strftime('%Y-%m-%d %H:%M:%f000', 'now'), strftime('%Y-%m-%d %H:%M:%f000', 'now')) ON CONFLICT (job_type, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING RETURNING job_id;
