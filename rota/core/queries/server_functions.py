"""PostgreSQL statements kept on the server as functions, so their plans are cached.

Every statement PostgreSQL runs is parsed, analysed and planned first. A
prepared statement does that once per connection; the executor's claim and
outcome statements (large data-modifying CTEs) cost 1.3-1.8 ms and 0.9 ms of
the server's CPU each to prepare, against 0.1-0.2 ms to run. Behind a
transaction pooler (PgBouncer 1.18, Debian's) nothing can be prepared: the next
transaction runs on another server connection, where the name is unknown or
another statement's. A PL/pgSQL function keeps the plans of its statements
for the life of the server connection, whichever client calls it, so each of
these statements is one, taking its parameters as arguments: called with no
statement prepared, the claim costs the server 0.15-0.18 ms.

``ServerFunction`` holds the statement itself (a ``TextClause`` with
``:name`` parameters, which the query modules and their tests read, plan and
snapshot as before), the SQL type of each parameter and of each column it
returns. The function's name ends in a hash of its definition, so a rota
release calls the functions of its own statements only: during a rolling
upgrade the older executors keep calling theirs. ``rota migrate`` installs the
functions of its release (``install``, after the migrations) and leaves other
releases' in place (nor does it replace one that is there: that needs the
role that owns it, and costs every server connection its cached plans); every
command checks that its own are there (``missing``) and asks for ``rota
migrate`` when they are not.

The parameters become ``p_<name>``, so a column is never mistaken for one;
``#variable_conflict use_column`` says the same of the returned columns. The
function is VOLATILE (the default): it writes, and runs under the caller's
transaction, autocommit included, so every guard of the statement holds as
when it is sent itself.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from sqlalchemy import Connection, TextClause, text

# A bound parameter of a TextClause: ``:name``, not the ``::`` of a cast.
_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
NAME_PREFIX = "rota_"
# The plan cache needs the argument names not to be column names (see above).
_ARG_PREFIX = "p_"


@dataclass(frozen=True)
class ServerFunction:
    """``statement`` as a PL/pgSQL function; ``params`` and ``returns`` as (name, SQL type)."""

    stem: str
    statement: TextClause
    params: Sequence[tuple[str, str]]
    returns: Sequence[tuple[str, str]]
    optional: frozenset[str] = frozenset()  # parameters a call may leave out (NULL)

    def __post_init__(self) -> None:
        used = set(_PARAM.findall(self.statement.text))
        declared = {name for name, _ in self.params}
        if used != declared:
            raise ValueError(
                f"{self.stem}: the statement's parameters {sorted(used)} are not the "
                f"declared ones {sorted(declared)}"
            )

    @cached_property
    def _definition(self) -> str:
        """Everything after the function's name: arguments, result, body."""
        body = _PARAM.sub(lambda m: _ARG_PREFIX + m.group(1), self.statement.text)
        args = ", ".join(f"{_ARG_PREFIX}{name} {sql_type}" for name, sql_type in self.params)
        columns = ", ".join(f"{name} {sql_type}" for name, sql_type in self.returns)
        return (
            f"({args})\nRETURNS TABLE ({columns})\nLANGUAGE plpgsql AS $rota$\n"
            f"#variable_conflict use_column\nBEGIN\nRETURN QUERY {body.strip()};\nEND\n$rota$"
        )

    @cached_property
    def name(self) -> str:
        digest = hashlib.sha256(f"{self.stem}{self._definition}".encode()).hexdigest()[:12]
        return f"{NAME_PREFIX}{self.stem}_{digest}"

    @cached_property
    def ddl(self) -> str:
        return f"CREATE FUNCTION {self.name}{self._definition}"

    @cached_property
    def call(self) -> TextClause:
        """``SELECT * FROM`` the function, each argument cast to its declared type
        (a list of small integers would otherwise bind as smallint[])."""
        args = ", ".join(f"CAST(:{name} AS {sql_type})" for name, sql_type in self.params)
        return text(f"SELECT * FROM {self.name}({args})")

    def execute(self, conn: Connection, params: Mapping[str, Any]) -> Sequence[Any]:
        """Call the function with ``params``: every declared one but those in
        ``optional`` (NULL when left out), and no other (a misspelt name would
        otherwise bind NULL: ``LIMIT NULL`` is no limit at all)."""
        declared = [name for name, _ in self.params]
        wrong = set(params) - set(declared)
        absent = [n for n in declared if n not in params and n not in self.optional]
        if wrong or absent:
            raise ValueError(f"{self.stem}: unknown parameters {sorted(wrong)}, missing {absent}")
        return conn.execute(self.call, {name: params.get(name) for name in declared}).all()


def install(conn: Connection, functions: Iterable[ServerFunction]) -> list[str]:
    """Create those of ``functions`` that ``conn``'s search path does not find, in the
    schema it creates in; returns their names. One already there is left as it is:
    replacing it would need its owner's role, and would make every server
    connection plan its statements again."""
    functions = list(functions)
    # Two installs at once would both create one function: one waits for the other.
    conn.execute(text("SELECT pg_advisory_xact_lock(hashtext('rota server functions'))"))
    absent = set(missing(conn, functions))
    for function in functions:
        if function.name in absent:
            conn.execute(text(function.ddl))
    return [f.name for f in functions if f.name in absent]


# A name ``ServerFunction.name`` gives, of this release's statements or another's.
_ANY_RELEASE = r"^rota_[a-z0-9_]+_[0-9a-f]{12}$"


def remove(conn: Connection, functions: Iterable[ServerFunction] | None) -> list[str]:
    """Drop ``functions`` (None: every release's) from the schema ``conn`` creates in;
    returns the names dropped. Another function of that schema is never touched."""
    params: dict[str, object]
    if functions is None:
        where, params = "p.proname ~ :pattern", {"pattern": _ANY_RELEASE}
    else:
        where = "p.proname = ANY(CAST(:names AS text[]))"
        params = {"names": [f.name for f in functions]}
    found = conn.execute(
        text(
            "SELECT p.oid::regprocedure::text, p.proname FROM pg_proc p"
            f" WHERE {where} AND p.pronamespace = "
            "(SELECT n.oid FROM pg_namespace n WHERE n.nspname = current_schema())"
        ),
        params,
    ).all()
    for signature, _ in found:  # regprocedure's text is quoted and schema-qualified
        conn.execute(text(f"DROP FUNCTION {signature}"))
    return sorted(str(name) for _, name in found)


def missing(conn: Connection, functions: Iterable[ServerFunction]) -> list[str]:
    """The names of ``functions`` that ``conn``'s search path does not find."""
    names = [f.name for f in functions]
    found = set(
        conn.execute(
            text(
                "SELECT p.proname FROM pg_proc p"
                " WHERE p.proname = ANY(CAST(:names AS text[]))"
                " AND p.pronamespace IN (SELECT n.oid FROM pg_namespace n"
                " WHERE n.nspname = ANY(current_schemas(false)))"
            ),
            {"names": names},
        ).scalars()
    )
    return [n for n in names if n not in found]
