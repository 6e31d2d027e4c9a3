"""Engines on PostgreSQL and SQLite, the database URL, and rota's PostgreSQL schema.

PostgreSQL is the production backend. SQLite is the embedded default and must
serve several processes on one host, so every SQLite connection runs in WAL
mode with a busy timeout, and every transaction starts with ``BEGIN IMMEDIATE``:
the write lock is taken up front, so two processes never both read and then
both fail to upgrade to a writer ("database is locked"). A SQLite setup that
cannot be made safe (an in-memory database, a filesystem without WAL) is
refused with a clear message instead of degrading.

Schema (PostgreSQL). ``make_engine(url, schema="x")`` puts every connection's
``search_path`` on ``x`` alone (a libpq ``options`` parameter in the URL, so the
LISTEN connections, which open psycopg directly from the URL, get it too).
Every statement names its tables unqualified, so tables, indexes, sequences,
the trigger function and Alembic's version table all live in ``x``, and two
installations in one database never see each other's rows. The NOTIFY
channels carry the schema in their names (``channel``). Without a schema the
server's ``search_path`` applies. SQLite has no schemas: a schema there is
refused.

Several hosts (PostgreSQL failover). libpq tries the hosts of a multi-host
URL in order and, with ``target_session_attrs=read-write``, keeps the one that
accepts writes. Three spellings are accepted: libpq's own
(``?host=a,b&port=5432,5433``), SQLAlchemy's repeated parameter
(``?host=a:5432&host=b:5433``) and the two mixed (``?host=a:5432,b:5433``).
``parse_url`` rewrites every one into libpq's form, the only one that both
SQLAlchemy's engine and the LISTEN connections (psycopg, from the rendered
URL) understand; ``display_url`` shows the hosts as ``a:5432,b:5433``.

Secrets. A database URL may carry a password: no message of this module
repeats the URL as given. ``display_url`` renders it with the password
masked, and ``scrub`` removes a password from any text about to be shown.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from typing import Any, NamedTuple

from sqlalchemy import URL, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

log = logging.getLogger("rota.database")

DEFAULT_URL = "sqlite:///rota.db"
SQLITE_BUSY_TIMEOUT_MS = 60_000
# A schema name becomes part of NOTIFY channel names (at most 63 bytes), so it
# is kept short and plain: no quoting is ever needed.
SCHEMA_PATTERN = re.compile(r"^[a-z_][a-z0-9_]{0,47}$")
# A host name, an IPv4 or IPv6 address, or libpq's comma-separated list of them.
_HOST = re.compile(r"^[A-Za-z0-9._:%,-]+$")
_OPTIONS_SEARCH_PATH = re.compile(r"-c\s*search_path=(\S+)")
# libpq also takes secrets as query parameters (``?password=``): never shown either.
_SECRET_PARAMS = ("password", "sslpassword")


def check_schema_name(schema: str) -> str:
    """``schema`` if it is a plain name (it is written into SQL text unquoted-safe)."""
    if not isinstance(schema, str) or not SCHEMA_PATTERN.fullmatch(schema):
        raise BadDatabaseSetting(
            f"schema {schema!r}: use 1 to 48 lower-case letters, digits and underscores, "
            "starting with a letter or underscore"
        )
    return schema


class DatabaseError(Exception):
    """A database problem a person can fix; the message says how."""


class BadDatabaseSetting(DatabaseError):
    """The URL or schema given is wrong (bad input, not a runtime failure)."""


class SchemaNotReady(DatabaseError):
    pass


def resolve_url(cli_value: str | None, environ: dict[str, str] | None = None) -> str:
    """``--db`` wins over ``ROTA_DATABASE_URL``, which wins over ``sqlite:///rota.db``.

    Surrounding whitespace is dropped (a URL read from a file or a Kubernetes
    secret often ends with a newline); ``postgresql://`` means psycopg 3.
    """
    env = os.environ if environ is None else environ
    url = (cli_value or "").strip() or env.get("ROTA_DATABASE_URL", "").strip() or DEFAULT_URL
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def resolve_schema(cli_value: str | None, environ: dict[str, str] | None = None) -> str | None:
    """``--schema`` wins over ``ROTA_SCHEMA``; None keeps the server's search_path."""
    env = os.environ if environ is None else environ
    value = (cli_value or "").strip() or env.get("ROTA_SCHEMA", "").strip()
    return value or None


def parse_url(url: str) -> URL:
    """The URL, checked; a mistake is a ``BadDatabaseSetting`` that never repeats the URL."""
    scheme = url.split("://", 1)[0] if "://" in url else ""
    example = "use sqlite:///path/to/rota.db or postgresql+psycopg://user@host:5432/dbname"
    try:
        parsed = make_url(url)
    except Exception:  # ArgumentError, or ValueError for a port that is not a number
        hint = f" (scheme {scheme!r})" if scheme and len(scheme) < 40 else ""
        raise BadDatabaseSetting(
            f"the database URL{hint} cannot be parsed: {example}; percent-encode special "
            "characters in the user name and password (@ as %40, : as %3A, / as %2F)"
        ) from None
    if parsed.host is not None and ("@" in parsed.host or "/" in parsed.host):
        raise BadDatabaseSetting(
            "the database URL has an '@' or '/' after its host part: a password holding "
            "'@', ':' or '/' must be percent-encoded (@ as %40, : as %3A, / as %2F)"
        )
    if parsed.port is not None and not 1 <= parsed.port <= 65535:
        raise BadDatabaseSetting("the database URL's port must be a number from 1 to 65535")
    if parsed.host is not None and not _HOST.match(parsed.host):
        raise BadDatabaseSetting(
            "the database URL's host is not a host name or an address (an IPv6 address "
            f"goes in brackets, like [::1]): {example}"
        )
    return _libpq_hosts(parsed)


def _query_list(value: str | tuple[str, ...] | None) -> list[str]:
    """A query parameter given once, several times, or comma-separated: its items."""
    if value is None:
        return []
    values = (value,) if isinstance(value, str) else value
    return [item.strip() for v in values for item in str(v).split(",")]


def _host_port(item: str) -> tuple[str, str]:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port`` -> (host, port or "")."""
    if item.startswith("["):
        host, _, rest = item[1:].partition("]")
        return host, rest[1:] if rest.startswith(":") else rest
    if item.count(":") == 1:
        host, _, port = item.partition(":")
        return host, port
    return item, ""  # a bare name, or an IPv6 address without brackets


def _libpq_hosts(url: URL) -> URL:
    """A URL whose ``host`` query parameter names several hosts, in libpq's form.

    ``?host=a:1&host=b:2`` or ``?host=a:1,b:2`` become ``?host=a,b&port=1,2``;
    a URL with no ``host`` parameter is returned as it is.
    """
    if "host" not in url.query or url.get_backend_name() != "postgresql":
        return url
    if url.host is not None:
        raise BadDatabaseSetting(
            "the database URL names its host twice (before the path and in ?host=): "
            "name the hosts in one place"
        )
    items = _query_list(url.query.get("host"))
    if not items or any(not item for item in items):
        raise BadDatabaseSetting("the database URL's ?host= has an empty host name")
    pairs = [_host_port(item) for item in items]
    ports = _ports_of(pairs, _query_list(url.query.get("port")))
    for host, _ in pairs:
        if not _HOST.match(host) or "," in host:
            raise BadDatabaseSetting(
                "the database URL's ?host= holds something that is not a host name or an "
                "address (an IPv6 address with a port goes in brackets, like [::1]:5432)"
            )
    for port in ports:
        if not port.isascii() or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise BadDatabaseSetting("the database URL's ports must be numbers from 1 to 65535")
    query = {k: v for k, v in url.query.items() if k not in ("host", "port")}
    query["host"] = ",".join(host for host, _ in pairs)
    if ports:
        query["port"] = ",".join(ports)
    return url.set(query=query)


def _ports_of(pairs: list[tuple[str, str]], given: list[str]) -> list[str]:
    """The ports of the hosts ``pairs`` (host, port or ""), or those ``given`` in ?port=.

    One form only, a port for every host or none, and one port or one per host;
    [] when no port is named.
    """
    ports = given
    if ports and any(port for _, port in pairs):
        raise BadDatabaseSetting(
            "the database URL gives ports both as host:port and in ?port=: use one form"
        )
    if not ports:
        ports = [port for _, port in pairs]
        if not any(ports):
            ports = []
        elif not all(ports):
            raise BadDatabaseSetting(
                "the database URL's ?host= gives a port for some hosts only: give one "
                "for each (host:port), or none"
            )
    if ports and len(ports) not in (1, len(pairs)):
        raise BadDatabaseSetting(
            f"the database URL names {len(pairs)} hosts and {len(ports)} ports: give one "
            "port, or one per host"
        )
    return ports


def display_url(url: str | URL) -> str:
    """The URL with its password masked, safe to print and log."""
    try:
        parsed = url if isinstance(url, URL) else parse_url(url)
    except BadDatabaseSetting:
        return "<unparseable database URL>"
    options = str(parsed.query.get("options", "") or "")
    if _OPTIONS_SEARCH_PATH.search(options):  # shown as "schema NAME" where it matters
        rest = _OPTIONS_SEARCH_PATH.sub("", options).strip()
        query = {k: v for k, v in parsed.query.items() if k != "options"}
        parsed = parsed.set(query={**query, **({"options": rest} if rest else {})})
    if any(k in parsed.query for k in _SECRET_PARAMS):
        parsed = parsed.update_query_dict({k: "***" for k in _SECRET_PARAMS if k in parsed.query})
    rendered = parsed.render_as_string(hide_password=True)
    if "host" in parsed.query:  # several hosts: a:5432,b:5433, not a%2Cb&port=5432%2C5433
        hosts = _query_list(parsed.query.get("host"))
        ports = _query_list(parsed.query.get("port"))
        if len(ports) == 1:
            ports = ports * len(hosts)
        shown = ",".join(
            (f"[{h}]" if ":" in h else h) + (f":{p}" if p else "")
            for h, p in zip(hosts, ports or [""] * len(hosts), strict=True)
        )
        rest = parsed.set(
            query={k: v for k, v in parsed.query.items() if k not in ("host", "port")}
        ).render_as_string(hide_password=True)
        base, sep, tail = rest.partition("?")
        rendered = f"{base}?host={shown}" + (f"&{tail}" if sep else "")
    return rendered


def scrub(text: str, url: str | None) -> str:
    """``text`` with the password of ``url`` (raw and percent-encoded) replaced by ***."""
    if not url:
        return text
    secrets: set[str] = set()
    try:
        parsed = make_url(url)
        if parsed.password:
            secrets.add(str(parsed.password))
        for key in _SECRET_PARAMS:
            value = parsed.query.get(key)
            values = (value,) if isinstance(value, str) else value or ()
            secrets.update(str(v) for v in values if v)
    except Exception:  # an unparseable URL: mask what looks like its userinfo
        pass
    userinfo = re.match(r"^[\w+.-]+://([^/]*)@", url)
    if userinfo and ":" in userinfo.group(1):
        raw = userinfo.group(1).split(":", 1)[1]
        secrets.add(raw)
        # With an unescaped '@', the "host" a resolver reports holds the tail.
        secrets.update(part for part in raw.split("@") if len(part) >= 4)
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def with_schema(url: URL, schema: str | None) -> URL:
    """PostgreSQL: the URL whose connections use ``schema`` as their only search_path."""
    if schema is None:
        return url
    if url.get_backend_name() != "postgresql":
        raise BadDatabaseSetting(
            f"--schema / ROTA_SCHEMA ({schema!r}) is for PostgreSQL; SQLite has no schemas: "
            "use a separate database file instead"
        )
    check_schema_name(schema)
    options = str(url.query.get("options", "") or "")
    options = _OPTIONS_SEARCH_PATH.sub("", options).strip()
    options = f"{options} -csearch_path={schema}".strip()
    return url.update_query_dict({"options": options})


def schema_of(url: URL) -> str | None:
    """The schema an engine made by ``make_engine(..., schema=...)`` works in, if any."""
    found = _OPTIONS_SEARCH_PATH.search(str(url.query.get("options", "") or ""))
    return found.group(1) if found else None


def channel(prefix: str, schema: str | None) -> str:
    """The NOTIFY channel of ``prefix`` for rota in ``schema`` (public: the plain prefix).

    The insert trigger (migration 0004) and ``channel_sql`` apply the same rule
    in SQL, to the schema the tables actually live in.
    """
    return prefix if schema in (None, "public") else f"{prefix}_{schema}"


def channel_sql(prefix: str) -> str:
    """``channel(prefix, current_schema())`` as a SQL expression (PostgreSQL)."""
    return (
        f"CASE WHEN current_schema() = 'public' THEN '{prefix}' "
        f"ELSE '{prefix}_' || current_schema() END"
    )


def listen_channel(conn: Any, prefix: str) -> str:
    """On a psycopg connection: the channel of ``prefix`` for the schema it searches."""
    row = conn.execute("SELECT current_schema()").fetchone()
    return channel(prefix, row[0] if row else None)


def libpq_dsn(engine: Engine) -> str:
    """``engine``'s PostgreSQL URL in libpq's form, password included, for a psycopg
    connection of its own (LISTEN, a cancel): never for output."""
    return engine.url.set(drivername="postgresql").render_as_string(hide_password=False)


# Idle connections an engine's pool keeps open; as many more (``max_overflow``,
# unless given) are opened under a burst and closed when given back.
DEFAULT_POOL_SIZE = 5


class EnginePool(NamedTuple):
    """How a command's engine pools: ``size`` connections kept, ``overflow`` more at most."""

    size: int = DEFAULT_POOL_SIZE
    overflow: int = DEFAULT_POOL_SIZE


DEFAULT_POOL = EnginePool()


def make_engine(
    url: str,
    *,
    pool_size: int = DEFAULT_POOL_SIZE,
    max_overflow: int | None = None,
    schema: str | None = None,
) -> Engine:
    parsed = with_schema(parse_url(url), schema)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return _sqlite_engine(parsed)
    if backend == "postgresql":
        if parsed.get_driver_name() != "psycopg":
            raise BadDatabaseSetting(
                f"unsupported PostgreSQL driver {parsed.get_driver_name()!r}: "
                "use postgresql+psycopg://"
            )
        engine = create_engine(
            parsed,
            pool_size=pool_size,
            max_overflow=pool_size if max_overflow is None else max_overflow,
            pool_pre_ping=True,
            connect_args={"application_name": "rota"},
            hide_parameters=True,
        )
        _prepare_only_on_direct_connections(engine)
        return engine
    raise BadDatabaseSetting(f"unsupported database {backend!r}: rota runs on PostgreSQL or SQLite")


_POOLER_REASON = "the server process is not the one the connection was started with"


def behind_pooler(dbapi_conn: Any) -> bool:
    """True when a pooler stands between this psycopg connection and the server.

    A pooler answers the startup itself, with a cancel key (process id) of its
    own, so the process id the connection was given is not the server
    process that runs its statements. On a direct connection the two agree.
    """
    pid = dbapi_conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    dbapi_conn.rollback()  # the connection is not in autocommit: end the SELECT's transaction
    return bool(pid != dbapi_conn.info.backend_pid)


def _prepare_only_on_direct_connections(engine: Engine) -> None:
    """Server-side prepared statements on direct connections only.

    psycopg prepares a statement on the server after its fifth execution
    (``prepare_threshold``) and names it ``_pg3_N``, per connection. A
    transaction pooler (PgBouncer's ``pool_mode = transaction``) runs the next
    transaction on another server connection, where that name is missing or
    means another statement: "prepared statement "_pg3_0" already exists".
    Behind a pooler every statement is therefore sent unprepared; the first
    such connection says so once in the log.
    """
    said = threading.Event()

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        if not behind_pooler(dbapi_conn):
            return
        dbapi_conn.prepare_threshold = None
        if not said.is_set():
            said.set()
            fields = {"prepared_statements": "off", "reason": _POOLER_REASON}
            log.info(
                'event=pooler_detected prepared_statements=off reason="%s"',
                _POOLER_REASON,
                extra={"event": "pooler_detected", "fields": fields},
            )


def sqlite_file_path(url: URL) -> str | None:
    """The file an SQLite URL names: ``sqlite:///path``, or an SQLite URI
    (``sqlite:///file:path?mode=ro&uri=true``, opened read-only); None for memory."""
    database = url.database
    if (
        database
        and str(url.query.get("uri", "")).lower() == "true"
        and database.startswith("file:")
    ):
        database = database[len("file:") :]
    return database or None


def _sqlite_engine(url: URL) -> Engine:
    database = sqlite_file_path(url)
    if not database or database == ":memory:" or "mode=memory" in str(url):
        raise BadDatabaseSetting(
            "an in-memory SQLite database cannot be shared between rota's processes: "
            "name a file, like sqlite:///rota.db"
        )
    directory = os.path.dirname(os.path.abspath(database))
    if not os.path.isdir(directory):
        raise BadDatabaseSetting(
            f"the directory of the SQLite database does not exist: {directory}"
        )
    engine = create_engine(
        url,
        poolclass=NullPool if os.environ.get("ROTA_SQLITE_NULLPOOL") else None,
        connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000, "check_same_thread": False},
        hide_parameters=True,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
        cur = dbapi_conn.cursor()
        try:
            mode = cur.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise DatabaseError(
                    f"SQLite database {database} cannot use WAL mode (got {mode!r}); several "
                    "processes cannot share it safely. Put it on a local filesystem."
                )
            cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
        finally:
            cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # SQLAlchemy never commits an AUTOCOMMIT connection: a BEGIN there
        # would hold every write until the connection closed, then lose it.
        if conn.get_execution_options().get("isolation_level") == "AUTOCOMMIT":
            return
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def short_error(exc: BaseException) -> str:
    """The first line of what the database (or the driver) said."""
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
