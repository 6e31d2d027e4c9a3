"""Tests of the ``rota`` command line through its real entry point: flags and their bounds,
hostile command lines, database URL mistakes, ``check``/``preview``, the job and
operator commands, ``serve``.
"""
