"""The bottom layer: what every other layer stands on, and nothing that runs.

Tables (``tables``), job states and their legal transitions (``states``), job
ids (``ids``), time as operators write it and as the database keeps it
(``durations``, ``timefmt``, ``sqltime``), the frozen configuration objects of
job types and schedules (``config``), what a claim hands to a worker
(``claimed``: no SQLAlchemy, for the isolated child), engines, URLs and the
PostgreSQL schema (``database``), the rules that make a value storable
(``storable``), the names an operator may have meant (``names``), the
operator's note (``operator_notes``), the metric catalogue
and its deltas (``metric_deltas``), retention policy (``retention``), the
version, and every SQL statement rota runs, one module per table, named for
its guard (``queries``).

May import: the standard library and third-party packages only; no other
``rota`` package.
"""
