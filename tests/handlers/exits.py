"""A handler module that ends its process while it is imported (the import-failure tests)."""

import os

os._exit(3)


def handler(ctx: object) -> None:  # never reached
    pass
