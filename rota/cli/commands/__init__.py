"""One module per ``rota`` command: ``register(subparsers)`` and ``run(args) -> int``."""
