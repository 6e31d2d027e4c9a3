-- Rendered by tests/core/test_sql_snapshots.py (ROTA_UPDATE_SQL=1 rewrites it).
CREATE FUNCTION rota_finish_75603ec4392d(p_owner text, p_now timestamptz, p_ids uuid[], p_gens bigint[], p_targets text[], p_outcomes text[], p_codes text[], p_details text[], p_delays double precision[], p_refunds integer[], p_reconciles boolean[], p_results text[], p_outputs text[], p_dropped bigint[], p_stages text[], p_dones bigint[], p_totals bigint[])
RETURNS TABLE (job_id uuid, lease_generation bigint, state varchar)
LANGUAGE plpgsql AS $rota$
#variable_conflict use_column
BEGIN
RETURN QUERY WITH b AS MATERIALIZED (
            SELECT *, CAST(p_owner AS text) AS owner, TRUE AS leased FROM unnest(
                CAST(p_ids AS uuid[]), CAST(p_gens AS bigint[]), CAST(p_targets AS text[]),
                CAST(p_outcomes AS text[]), CAST(p_codes AS text[]), CAST(p_details AS text[]),
                CAST(p_delays AS double precision[]), CAST(p_refunds AS integer[]),
                CAST(p_reconciles AS boolean[]), CAST(p_results AS text[]),
                CAST(p_outputs AS text[]), CAST(p_dropped AS bigint[]),
                CAST(p_stages AS text[]), CAST(p_dones AS bigint[]), CAST(p_totals AS bigint[])
            ) AS b(job_id, gen, target, outcome, code, detail, delay, refund, reconcile,
                   result_ref, output, dropped, stage, done, total)
        ),
        done AS (
            UPDATE jobs AS j SET
            state = CASE WHEN j.state = 'CANCEL_REQUESTED' AND b.target IN ('RETRY_WAIT', 'QUEUED') THEN 'CANCELLED' ELSE b.target END,
            attempt_count = j.attempt_count - b.refund,
            run_after = CASE WHEN b.delay IS NULL THEN j.run_after ELSE (coalesce(CAST(p_now AS timestamptz), now()) + make_interval(secs => CAST(b.delay AS double precision))) END,
            lease_owner = NULL,
            lease_expires_at = NULL,
            last_error_code = coalesce(b.code, j.last_error_code),
            last_error_detail = CASE WHEN b.code IS NULL THEN j.last_error_detail
                                     ELSE b.detail END,
            needs_reconcile = coalesce(b.reconcile, j.needs_reconcile),
            result_ref = coalesce(b.result_ref, j.result_ref),
            progress_stage = coalesce(b.stage, j.progress_stage),
            progress_done = coalesce(b.done, j.progress_done),
            progress_total = coalesce(b.total, j.progress_total),
            finished_at = CASE WHEN CASE WHEN j.state = 'CANCEL_REQUESTED' AND b.target IN ('RETRY_WAIT', 'QUEUED') THEN 'CANCELLED' ELSE b.target END IN ('SUCCEEDED', 'FAILED', 'CANCELLED') THEN coalesce(CAST(p_now AS timestamptz), now()) ELSE NULL END,
            updated_at = coalesce(CAST(p_now AS timestamptz), now())
            FROM b
            WHERE j.job_id = b.job_id
          AND j.lease_generation = b.gen
          AND j.lease_owner = b.owner
          AND (j.state IN ('RUNNING', 'CANCEL_REQUESTED')) = b.leased AND (b.target <> 'CANCELLED' OR j.state = 'CANCEL_REQUESTED')
            RETURNING j.job_id, j.lease_generation, j.state, b.outcome, b.code, b.detail,
                      b.output, b.dropped, j.schedule_name, j.scheduled_for, j.finished_at
        ),
        closed AS (
            -- The batch row comes back with its job: joining done to b again was
            -- planned as one row against ten and compared every pair.
            UPDATE job_attempts AS a
            SET ended_at = coalesce(CAST(p_now AS timestamptz), now()),
                outcome = CASE WHEN done.state = 'CANCELLED' THEN 'CANCELLED'
                               ELSE done.outcome END,
                error_code = done.code,
                error_detail = done.detail
            FROM done
            WHERE a.job_id = done.job_id AND a.lease_generation = done.lease_generation
        ),
        kept AS (
            INSERT INTO job_attempt_output (job_id, lease_generation, output, dropped_bytes)
            SELECT job_id, lease_generation, output, dropped FROM done
            WHERE output IS NOT NULL
        ON CONFLICT (job_id, lease_generation) DO UPDATE
        SET output = excluded.output, dropped_bytes = excluded.dropped_bytes
        ),
        recorded AS (
        INSERT INTO schedule_outcomes
            (schedule_name, last_state, last_instant, last_finished_at, last_success_instant)
        SELECT schedule_name, state, scheduled_for, finished_at, success FROM (
            SELECT e.schedule_name, e.state, e.scheduled_for, e.finished_at,
                   row_number() OVER (PARTITION BY e.schedule_name
                                      ORDER BY e.scheduled_for DESC, e.finished_at DESC) AS n,
                   max(CASE WHEN e.state = 'SUCCEEDED' THEN e.scheduled_for END)
                       OVER (PARTITION BY e.schedule_name) AS success
            FROM done AS e
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
                ELSE schedule_outcomes.last_success_instant END
        )
        SELECT job_id, lease_generation, state FROM done;
END
$rota$;

SELECT * FROM rota_finish_75603ec4392d(CAST(:owner AS text), CAST(:now AS timestamptz), CAST(:ids AS uuid[]), CAST(:gens AS bigint[]), CAST(:targets AS text[]), CAST(:outcomes AS text[]), CAST(:codes AS text[]), CAST(:details AS text[]), CAST(:delays AS double precision[]), CAST(:refunds AS integer[]), CAST(:reconciles AS boolean[]), CAST(:results AS text[]), CAST(:outputs AS text[]), CAST(:dropped AS bigint[]), CAST(:stages AS text[]), CAST(:dones AS bigint[]), CAST(:totals AS bigint[]));
