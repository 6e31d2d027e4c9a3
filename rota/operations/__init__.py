"""Operator actions: the one service every entry point calls.

Cancel and replay of one job or a filtered set (``jobs``), pause, resume,
trigger and backfill of a schedule (``schedules``), and pruning finished jobs
by hand (``prune``). The CLI, the HTTP API and the dashboard all act through
these functions, so each action is written once: one guarded statement, its
``operator_actions`` rows with the actor and the reason (the audit trail),
one event line after commit.

May import: ``rota.scheduler``, ``rota.executor`` and every layer below them;
never ``rota.api`` or ``rota.cli``.
"""
