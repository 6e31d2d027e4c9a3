"""A handler module that raises KeyboardInterrupt while it is imported (import-failure tests)."""

raise KeyboardInterrupt("raised by a handler module at import")


def handler(ctx: object) -> None:  # never reached
    pass
