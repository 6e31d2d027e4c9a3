"""The ``rota`` command line: one module per command under ``cli.commands``."""
