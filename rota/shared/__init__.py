"""Pieces both halves of rota stand on.

``models`` declares the tables, ``database`` opens engines and transactions on
PostgreSQL or SQLite, ``sqltime`` puts the database clock into statements,
``states`` names the job states and their legal transitions, ``durations`` and
``timefmt`` parse and print the units operators write, and ``queries`` holds
every SQL statement, one module per table.
"""
