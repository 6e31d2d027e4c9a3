-- Rendered by tests/core/test_sql_snapshots.py (ROTA_UPDATE_SQL=1 rewrites it).
UPDATE schedules AS s
SET cursor_at = v.cursor_at,
    next_fire_at = v.next_fire_at,
    last_fire_at = coalesce(v.last_fire_at, s.last_fire_at),
    last_job_id = coalesce(v.last_job_id, s.last_job_id),
    skipped_count = s.skipped_count + v.skipped_add,
    coalesced_count = s.coalesced_count + v.coalesced_add,
    set_aside_reason = v.set_aside_reason,
    coalesce_from = v.coalesce_from,
    coalesce_count = v.coalesce_count,
    updated_at = now()
FROM unnest(CAST(%(name)b AS text[]), CAST(%(expected)b AS timestamptz[]),
            CAST(%(cursor_at)b AS timestamptz[]), CAST(%(next_fire_at)b AS timestamptz[]),
            CAST(%(last_fire_at)b AS timestamptz[]), CAST(%(last_job_id)b AS uuid[]),
            CAST(%(skipped_add)b AS bigint[]), CAST(%(coalesced_add)b AS bigint[]),
            CAST(%(set_aside_reason)b AS text[]), CAST(%(coalesce_from)b AS timestamptz[]),
            CAST(%(coalesce_count)b AS bigint[]))
  AS v(name, expected, cursor_at, next_fire_at, last_fire_at, last_job_id,
       skipped_add, coalesced_add, set_aside_reason, coalesce_from, coalesce_count)
WHERE s.name = v.name AND s.next_fire_at = v.expected
  AND s.name = ANY(CAST(%(name)b AS text[]));
