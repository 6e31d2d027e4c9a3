"""The ``rota`` command line: one module per command under ``cli.commands``.

May import: every layer; nothing imports it.
"""
