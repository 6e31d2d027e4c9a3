"""Operator actions: the one service every entry point calls.

Cancel and replay of one job or a filtered set (``jobs``), and pause, resume,
trigger and backfill of a schedule (``schedules``). The CLI, the HTTP API and
the dashboard all act through these functions, so each action is written
once: one guarded statement, one ``operator_actions`` row with its actor and
reason, one event line after commit.

May import: ``rota.scheduler``, ``rota.executor`` and every layer below them;
never ``rota.api`` or ``rota.cli``.
"""
