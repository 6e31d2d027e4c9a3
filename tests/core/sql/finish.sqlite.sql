-- Rendered by tests/core/test_sql_snapshots.py (ROTA_UPDATE_SQL=1 rewrites it).
WITH b AS MATERIALIZED (
    SELECT json_extract(value, '$.id') AS job_id,
           json_extract(value, '$.gen') AS gen,
           json_extract(value, '$.target') AS target,
           json_extract(value, '$.code') AS code,
           json_extract(value, '$.detail') AS detail,
           json_extract(value, '$.delay') AS delay,
           json_extract(value, '$.refund') AS refund,
           json_extract(value, '$.reconcile') AS reconcile,
           json_extract(value, '$.result') AS result_ref,
           json_extract(value, '$.stage') AS stage,
           json_extract(value, '$.done') AS done,
           json_extract(value, '$.total') AS total
    FROM json_each(:batch)
)
UPDATE jobs SET
    state = CASE WHEN jobs.state = 'CANCEL_REQUESTED' AND b.target IN ('RETRY_WAIT', 'QUEUED') THEN 'CANCELLED' ELSE b.target END,
    attempt_count = jobs.attempt_count - b.refund,
    run_after = CASE WHEN b.delay IS NULL THEN jobs.run_after ELSE strftime('%Y-%m-%d %H:%M:%f000', coalesce(:now, 'now'), printf('%+.3f seconds', b.delay)) END,
    lease_owner = NULL,
    lease_expires_at = NULL,
    last_error_code = coalesce(b.code, jobs.last_error_code),
    last_error_detail = CASE WHEN b.code IS NULL THEN jobs.last_error_detail
                             ELSE b.detail END,
    needs_reconcile = coalesce(b.reconcile, jobs.needs_reconcile),
    result_ref = coalesce(b.result_ref, jobs.result_ref),
    progress_stage = coalesce(b.stage, jobs.progress_stage),
    progress_done = coalesce(b.done, jobs.progress_done),
    progress_total = coalesce(b.total, jobs.progress_total),
    finished_at = CASE WHEN CASE WHEN jobs.state = 'CANCEL_REQUESTED' AND b.target IN ('RETRY_WAIT', 'QUEUED') THEN 'CANCELLED' ELSE b.target END IN ('SUCCEEDED', 'FAILED', 'CANCELLED') THEN coalesce(:now, strftime('%Y-%m-%d %H:%M:%f000', 'now')) ELSE NULL END,
    updated_at = coalesce(:now, strftime('%Y-%m-%d %H:%M:%f000', 'now'))
FROM b
WHERE jobs.job_id = b.job_id
  AND jobs.lease_generation = b.gen
  AND jobs.lease_owner = :owner
  AND jobs.state IN ('RUNNING', 'CANCEL_REQUESTED') AND (b.target <> 'CANCELLED' OR jobs.state = 'CANCEL_REQUESTED')
RETURNING jobs.job_id, jobs.lease_generation, jobs.state;

UPDATE job_attempts
SET ended_at = coalesce(:now, strftime('%Y-%m-%d %H:%M:%f000', 'now')),
    outcome = json_extract(b.value, '$.outcome'),
    error_code = json_extract(b.value, '$.code'),
    error_detail = json_extract(b.value, '$.detail')
FROM json_each(:batch) AS b
WHERE job_attempts.job_id = json_extract(b.value, '$.id')
  AND job_attempts.lease_generation = json_extract(b.value, '$.gen');

INSERT INTO job_attempt_output (job_id, lease_generation, output, dropped_bytes)
SELECT json_extract(value, '$.id'), json_extract(value, '$.gen'),
       json_extract(value, '$.output'), json_extract(value, '$.dropped')
FROM json_each(:batch) WHERE true
    ON CONFLICT (job_id, lease_generation) DO UPDATE
    SET output = excluded.output, dropped_bytes = excluded.dropped_bytes;

INSERT INTO schedule_outcomes
    (schedule_name, last_state, last_instant, last_finished_at, last_success_instant)
SELECT schedule_name, state, scheduled_for, finished_at, success FROM (
    SELECT e.schedule_name, e.state, e.scheduled_for, e.finished_at,
           row_number() OVER (PARTITION BY e.schedule_name
                              ORDER BY e.scheduled_for DESC, e.finished_at DESC) AS n,
           max(CASE WHEN e.state = 'SUCCEEDED' THEN e.scheduled_for END)
               OVER (PARTITION BY e.schedule_name) AS success
    FROM (SELECT schedule_name, scheduled_for, state, finished_at FROM jobs
          WHERE job_id IN (SELECT value FROM json_each(:ids))) AS e
    WHERE e.schedule_name IS NOT NULL AND e.scheduled_for IS NOT NULL
      AND e.finished_at IS NOT NULL AND e.state IN ('SUCCEEDED', 'FAILED', 'CANCELLED')
) AS newest
WHERE n = 1
ORDER BY schedule_name
ON CONFLICT (schedule_name) DO UPDATE SET
    last_state = CASE WHEN excluded.last_instant >= schedule_outcomes.last_instant THEN excluded.last_state
                      ELSE schedule_outcomes.last_state END,
    last_finished_at = CASE WHEN excluded.last_instant >= schedule_outcomes.last_instant THEN excluded.last_finished_at
                            ELSE schedule_outcomes.last_finished_at END,
    last_instant = CASE WHEN excluded.last_instant >= schedule_outcomes.last_instant THEN excluded.last_instant
                        ELSE schedule_outcomes.last_instant END,
    last_success_instant = CASE
        WHEN schedule_outcomes.last_success_instant IS NULL
          OR excluded.last_success_instant > schedule_outcomes.last_success_instant
        THEN coalesce(excluded.last_success_instant,
                      schedule_outcomes.last_success_instant)
        ELSE schedule_outcomes.last_success_instant END;
