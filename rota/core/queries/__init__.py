"""Every SQL statement rota runs, one module per table, each named for its guard."""
