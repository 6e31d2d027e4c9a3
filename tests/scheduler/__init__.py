"""Tests of ``rota.scheduler``: the rules (cron, RRULE, every, DST),
misfire/overlap/jitter, ticks, bounded work, ``rota apply``,
pause/resume/trigger/backfill, set-aside schedules, the schedule file loader, the
replica loop and killed replicas.
"""
