"""Process concerns that every long-running rota process shares.

A fresh identity per process start (``identity``), the worker registry row
(``registry``), riding out database outages (``outage``), liveness for
``--health-port`` (``liveness``), structured log events and the two log
formats (``events``, ``logformat``, ``logcontext``), the thread that
flushes a process's metric deltas (``metrics_flush``), the start-up heap kept
out of the garbage collector's passes (``heap``), and the one start, stop and
join protocol every background loop implements (``startstop``).

May import: ``rota.core`` (and ``rota.migrations``); never ``rota.producer``,
the scheduler, the executor or anything above them.
"""
