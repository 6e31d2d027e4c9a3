-- Rendered by tests/core/test_sql_snapshots.py (ROTA_UPDATE_SQL=1 rewrites it).
CREATE FUNCTION rota_succeed_5426f69b2dab(p_owner text, p_now timestamptz, p_ids uuid[], p_gens bigint[])
RETURNS TABLE (job_id uuid, lease_generation bigint, state varchar)
LANGUAGE plpgsql AS $rota$
#variable_conflict use_column
BEGIN
RETURN QUERY WITH b AS MATERIALIZED (
            SELECT *, CAST(p_owner AS text) AS owner, TRUE AS leased
            FROM unnest(CAST(p_ids AS uuid[]), CAST(p_gens AS bigint[])) AS b(job_id, gen)
        ),
        done AS (
            UPDATE jobs AS j
            SET state = 'SUCCEEDED',
                lease_owner = NULL,
                lease_expires_at = NULL,
                needs_reconcile = FALSE,
                finished_at = coalesce(CAST(p_now AS timestamptz), now()),
                updated_at = coalesce(CAST(p_now AS timestamptz), now())
            FROM b
            WHERE j.job_id = b.job_id
          AND j.lease_generation = b.gen
          AND j.lease_owner = b.owner
          AND (j.state IN ('RUNNING', 'CANCEL_REQUESTED')) = b.leased
            RETURNING j.job_id, j.lease_generation, j.state, j.schedule_name, j.scheduled_for,
                      j.finished_at
        ),
        closed AS (
            UPDATE job_attempts AS a
            SET ended_at = coalesce(CAST(p_now AS timestamptz), now()), outcome = 'SUCCEEDED', error_code = NULL, error_detail = NULL
            FROM done
            WHERE a.job_id = done.job_id AND a.lease_generation = done.lease_generation
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

SELECT * FROM rota_succeed_5426f69b2dab(CAST(:owner AS text), CAST(:now AS timestamptz), CAST(:ids AS uuid[]), CAST(:gens AS bigint[]));
