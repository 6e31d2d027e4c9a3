-- Rendered by tests/core/test_sql_snapshots.py (ROTA_UPDATE_SQL=1 rewrites it).
INSERT INTO jobs (job_id, job_type, pool, priority, tenant, concurrency_key, max_attempts, lease_seconds, idempotent, payload_ref, args, dedup_key, schedule_name, scheduled_for, covers_from, covers_count, run_after, state, attempt_count,
                                          created_at, updated_at)
SELECT v.job_id, v.job_type, v.pool, v.priority, v.tenant, v.concurrency_key, v.max_attempts, v.lease_seconds, v.idempotent, v.payload_ref, v.args, v.dedup_key, v.schedule_name, v.scheduled_for, v.covers_from, v.covers_count, coalesce(v.run_after, now()), 'QUEUED', 0, now(), now()
FROM unnest(CAST(%(job_id)b AS uuid[]), CAST(%(job_type)b AS text[]), CAST(%(pool)b AS text[]), CAST(%(priority)b AS integer[]), CAST(%(tenant)b AS text[]), CAST(%(concurrency_key)b AS text[]), CAST(%(max_attempts)b AS integer[]), CAST(%(lease_seconds)b AS double precision[]), CAST(%(idempotent)b AS boolean[]), CAST(%(payload_ref)b AS text[]), CAST(%(args)b AS json[]), CAST(%(dedup_key)b AS text[]), CAST(%(schedule_name)b AS text[]), CAST(%(scheduled_for)b AS timestamptz[]), CAST(%(covers_from)b AS timestamptz[]), CAST(%(covers_count)b AS integer[]), CAST(%(run_after)b AS timestamptz[]))
  AS v(job_id, job_type, pool, priority, tenant, concurrency_key, max_attempts, lease_seconds, idempotent, payload_ref, args, dedup_key, schedule_name, scheduled_for, covers_from, covers_count, run_after)
ON CONFLICT (job_type, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
RETURNING job_id;
