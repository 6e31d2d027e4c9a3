"""``rota serve``: the HTTP API, the Prometheus metrics and the dashboard (one ASGI app).

::

    app = create_app(engine, token=os.environ.get("ROTA_API_TOKEN"))  # or tokens=, hosts=
    serve(app, host="127.0.0.1", port=8080)          # uvicorn, until SIGTERM/SIGINT

The app holds no state of its own: every answer comes from the database, so
any number of ``rota serve`` processes can run side by side and agree. Jobs
are created through the public producer API (``rota.producer.enqueue``), so the
API validates values, deduplicates and applies backpressure exactly like
``rota.enqueue`` and ``rota enqueue``; operator actions go through
``rota.operations``, the service the CLI calls, so each records its actor and
logs its event the same way from every entry point.

Modules: ``app`` (assembly, health), ``auth`` (the gate before every route:
Host, other origins, the token, the role, the security headers), ``identities``
(named tokens with roles, the tokens file), ``access`` (the role each method and
path needs), ``browser`` (the Host names answered, the refusal of changes from
other origins, the headers every answer carries), ``problems`` (RFC 9457
errors), ``methods`` (HEAD, OPTIONS and 405 from the routes), ``openapi_doc``
(the OpenAPI document, completed with the gate's answers), ``jobs``, ``bulk``
(their bulk forms), ``schedules``, ``late``, ``outputs`` and ``audit`` (the
routes), ``resources`` (what a job and a schedule look like as JSON),
``exposition`` (``GET /metrics``), ``dashboard`` (``GET /`` and its data),
``server`` (binding and running uvicorn).

May import: ``rota.operations`` and every layer below it; never ``rota.cli``.
"""

from rota.api.app import create_app

__all__ = ["create_app"]
