"""The producer API: create jobs inside the caller's own transaction.

``enqueue`` and ``enqueue_many`` (re-exported as ``rota.enqueue``), and the
backpressure that refuses a submission past a job type's limits
(``backpressure``). The CLI's ``rota enqueue`` and the API's ``POST /jobs`` go
through here, so every entry point validates, deduplicates and sheds alike.
``notify`` enqueues webhook deliveries (jobs of the built-in ``rota.notify``)
for an event, in the transaction that records it.

May import: ``rota.core`` (and ``rota.migrations``); never ``rota.runtime``,
the scheduler, the executor or anything above them.
"""
