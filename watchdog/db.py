"""The database layer: the only module that imports psycopg.

It owns connections (a pool for long-lived users of the API, one plain
connection for a CLI command), runs the named statements of ``sql/queries.sql``
and the migrations, and turns driver errors into ours.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from . import sql
from .errors import BadInput, DatabaseError, SchemaMissing, redact, scrub

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

logger = logging.getLogger(__name__)

Row = dict[str, Any]
Connection = psycopg.Connection[Any]

# pg_advisory_xact_lock key for migrations: any fixed 64-bit number of our own.
MIGRATION_LOCK_KEY = 0x61666B5F6D696772  # "afk_migr"
#: what PgBouncer says when it refuses a startup parameter
REFUSED_OPTIONS = "unsupported startup parameter"

def json_param(value: Any) -> Jsonb:
    return Jsonb(value)


@contextmanager
def translate_errors(conninfo: str | None = None) -> Iterator[None]:
    """Driver errors become ours, with a one-line reason and no secrets: the
    password of ``conninfo`` is scrubbed from whatever libpq or psycopg said."""
    try:
        yield
    except (pg_errors.UndefinedTable, pg_errors.UndefinedObject) as exc:
        raise SchemaMissing(
            f"the afk schema is missing or outdated ({first_line(exc, conninfo)}): "
            "run `afk migrate`") from exc
    except psycopg.OperationalError as exc:
        raise DatabaseError(f"database unreachable: {first_line(exc, conninfo)}") from exc
    except psycopg.Error as exc:
        raise DatabaseError(f"database error: {first_line(exc, conninfo)}") from exc


def first_line(exc: BaseException, conninfo: str | None = None) -> str:
    text = str(exc).strip().splitlines()
    return scrub(text[0], conninfo) if text else type(exc).__name__


def check_conninfo(conninfo: str) -> None:
    """Refuse a connection string libpq cannot parse, without repeating it:
    libpq's own message quotes the token it choked on, which may be the
    password."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        conninfo_to_dict(conninfo)
    except psycopg.Error:
        raise BadInput("the DSN is not a valid connection string (check its quoting; a % in "
                       "a URL must be written %25)") from None


class Database:
    """Connections to one PostgreSQL database.

    ``pool_size=None`` (the CLI) opens one connection on first use and keeps
    it; a number opens a psycopg_pool pool of that many on first use. Every
    statement runs in autocommit mode unless the caller passes its own
    connection, whose transaction it then joins.
    """

    def __init__(self, conninfo: str, *, pool_size: int | None = None,
                 connect_timeout: float = 10, statement_timeout: float | None = None,
                 application_name: str = "afk") -> None:
        check_conninfo(conninfo)
        self.conninfo = conninfo
        self._pool_size = pool_size
        self._connect_timeout = connect_timeout
        self._kwargs: dict[str, Any] = {"application_name": application_name}
        if statement_timeout is not None:
            self._kwargs["options"] = f"-c statement_timeout={int(statement_timeout * 1000)}"
        self._pool: ConnectionPool[Connection] | None = None
        self._conn: Connection | None = None
        #: behind a connection pooler (None: not known yet)
        self.pooled: bool | None = None

    def __repr__(self) -> str:
        return f"Database({redact(self.conninfo)!r})"

    def connect(self, *, autocommit: bool = True) -> Connection:
        """A new connection of its own (the caller closes it)."""
        with translate_errors(self.conninfo):
            try:
                conn = self._connect(autocommit)
            except psycopg.OperationalError as exc:
                if "options" not in self._kwargs or REFUSED_OPTIONS not in str(exc):
                    raise
                self._options_refused()
                conn = self._connect(autocommit)
            # one connection per command: too few repeats for prepared statements
            # to pay, and none to go wrong behind a pooler
            conn.prepare_threshold = None
            return conn

    def _connect(self, autocommit: bool) -> Connection:
        return psycopg.connect(self.conninfo, autocommit=autocommit, row_factory=dict_row,
                               connect_timeout=max(1, int(self._connect_timeout)),
                               **self._kwargs)

    def _options_refused(self) -> None:
        """PgBouncer (1.18 and most poolers) refuses the ``options`` startup
        parameter that carries our statement_timeout. Connect without it: the
        pooler's own ``query_timeout`` or the role's ``statement_timeout``
        then bounds a statement."""
        self._kwargs.pop("options", None)
        self.pooled = True
        logger.info("the server refused startup options (a connection pooler): "
                    "connecting without a per-connection statement_timeout",
                    extra={"action": "pooler"})

    def _configure(self, conn: Connection) -> None:
        """Prepared statements live on one server connection, and a pooler in
        transaction mode runs each transaction on any of its server
        connections, where ``_pg3_0`` is missing or is another client's
        statement. A pooler hands its clients a backend key of its own, never
        the server's pid: where the two differ, prepared statements are off."""
        if self.pooled is None:
            row = conn.execute("SELECT pg_backend_pid() AS pid").fetchone()
            self.pooled = row is None or row["pid"] != conn.info.backend_pid
            if self.pooled:
                logger.info("connected through a pooler: prepared statements are off",
                            extra={"action": "pooler"})
        if self.pooled:
            conn.prepare_threshold = None

    @contextmanager
    def connection(self, conn: Connection | None = None) -> Iterator[Connection]:
        if conn is not None:
            yield conn
            return
        if self._pool_size is None:
            if self._conn is None or self._conn.closed or self._conn.broken:
                self._conn = self.connect()
            yield self._conn
            return
        if self._pool is None:
            from psycopg_pool import ConnectionPool

            if "options" in self._kwargs:
                self.connect().close()  # learn now whether a pooler refuses them
            self._pool = ConnectionPool(
                self.conninfo, min_size=1, max_size=self._pool_size, open=False,
                kwargs={"autocommit": True, "row_factory": dict_row, **self._kwargs},
                timeout=self._connect_timeout, configure=self._configure,
                # a connection broken by a server restart is replaced, not handed out
                check=ConnectionPool.check_connection,
            )
            with translate_errors(self.conninfo):
                self._pool.open(wait=False)
        with translate_errors(self.conninfo), self._pool.connection() as c:
            yield c

    def fetch(self, name: str, params: Mapping[str, Any] | None = None,
              conn: Connection | None = None) -> list[Row]:
        """Run the named statement in one round trip; return its rows as dicts."""
        statement = sql.query(name)
        with translate_errors(self.conninfo), self.connection(conn) as c:
            cur = c.cursor(row_factory=dict_row)
            cur.execute(statement, params or {})
            # (rownumber, not description: description builds column objects each time)
            return cur.fetchall() if cur.rownumber is not None else []

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A connection inside a transaction: committed when the block ends,
        rolled back if it raises."""
        with translate_errors(self.conninfo), self.connection() as conn, conn.transaction():
            yield conn

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- migrations -------------------------------------------------------

    def migrate(self) -> list[str]:
        """Apply the missing migrations in one transaction; return their names.

        An advisory lock serialises concurrent callers: the second waits, then
        finds nothing left to do.
        """
        applied: list[str] = []
        with translate_errors(self.conninfo), self.connect(autocommit=False) as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS afk_schema_version ("
                " version int PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            done = {r["version"] for r in conn.execute("SELECT version FROM afk_schema_version")}
            for version, name, text in sql.migrations():
                if version in done:
                    continue
                logger.info("applying migration %s", name, extra={"action": "migrate"})
                conn.execute(text)
                conn.execute(
                    "INSERT INTO afk_schema_version (version, name) VALUES (%s, %s)",
                    (version, name),
                )
                applied.append(name)
            conn.commit()
        return applied

    def schema_version(self) -> int:
        with translate_errors(self.conninfo), self.connection() as c:
            found = c.execute("SELECT to_regclass('afk_schema_version') AS t").fetchone()
            if not found or found["t"] is None:
                return 0
            row = c.execute(
                "SELECT coalesce(max(version), 0) AS v FROM afk_schema_version").fetchone()
            return int(row["v"]) if row else 0
