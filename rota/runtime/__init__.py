"""Process concerns that every long-running rota process shares.

A fresh identity per process start (``identity``), the worker registry row
(``registry``), riding out database outages (``outage``), liveness for
``--health-port`` (``liveness``), structured log events and the two log
formats (``events``, ``logformat``, ``logcontext``), and the thread that
flushes a process's metric deltas (``metrics_flush``).

May import: ``rota.core`` (and ``rota.migrations``); never ``rota.producer``,
the scheduler, the executor or anything above them.
"""
