"""rota's version: ``rota.__version__``, ``rota --version`` and the worker registry's rows."""

__version__ = "0.2.0"
