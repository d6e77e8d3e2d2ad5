"""The database layer: the only module that imports psycopg.

It owns connections (a pool for long-lived users of the API, one plain
connection for a CLI command), runs the named statements of ``sql/*.sql``
and the migrations, and turns driver errors into ours.
"""

from __future__ import annotations

import logging
import os
import select
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from . import sql
from .errors import BadInput, Conflict, DatabaseError, SchemaMissing, redact, scrub

logger = logging.getLogger(__name__)

Row = dict[str, Any]
Connection = psycopg.Connection[Any]

# pg_advisory_xact_lock key for migrations: any fixed 64-bit number of our own.
MIGRATION_LOCK_KEY = 0x61666B5F6D696772  # "afk_migr"
#: what PgBouncer says when it refuses a startup parameter
REFUSED_OPTIONS = "unsupported startup parameter"
#: the SQLSTATE afk's own triggers raise for input they refuse (migration
#: 0030: a --branch another task holds); its message is the user's line
REFUSED_INPUT = "AFK22"


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
            "run `afk migrate`"
        ) from exc
    except pg_errors.UniqueViolation as exc:
        raise Conflict(f"database error: {first_line(exc, conninfo)}") from exc
    except pg_errors.QueryCanceled as exc:
        raise DatabaseError(
            f"the statement was cancelled ({first_line(exc, conninfo)}): a row locked "
            "by another session, or a database too busy; nothing was changed"
        ) from exc
    except psycopg.OperationalError as exc:
        raise DatabaseError(f"database unreachable: {first_line(exc, conninfo)}") from exc
    except psycopg.Error as exc:
        if exc.sqlstate == REFUSED_INPUT:
            raise BadInput(first_line(exc, conninfo)) from exc
        raise DatabaseError(f"database error: {first_line(exc, conninfo)}") from exc


def first_line(exc: BaseException, conninfo: str | None = None) -> str:
    text = str(exc).strip().splitlines()
    return scrub(text[0], conninfo) if text else type(exc).__name__


def _run(conn: Connection, statement: str, params: Mapping[str, Any] | None) -> list[Row]:
    cur = conn.cursor(row_factory=dict_row)
    cur.execute(statement, params or {})
    # (rownumber, not description: description builds column objects each time)
    return cur.fetchall() if cur.rownumber is not None else []


def _reusable(conn: Connection) -> bool:
    """Open and outside any transaction (what a connection going back to the
    pool must be; :func:`_alive` looks further when it is taken again)."""
    return (
        not conn.closed
        and not conn.broken
        and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    )


def _alive(conn: Connection) -> bool:
    """Healthy and idle. An idle connection has nothing to read: a readable
    socket means the server closed it (or said why it will)."""
    if not _reusable(conn):
        return False
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError, psycopg.Error):
        return False
    return not readable


def _connection_lost(exc: psycopg.Error) -> bool:
    """The connection failed, as opposed to the statement: class 08, the
    server shutting down or not accepting connections yet (a restart, a
    promotion), or a connection psycopg found broken."""
    state = exc.sqlstate or ""
    if state.startswith("08") or state in {"57P01", "57P02", "57P03"}:
        return True
    return (
        isinstance(exc, psycopg.OperationalError)
        and not isinstance(exc, pg_errors.QueryCanceled | pg_errors.LockNotAvailable)
        and not state
    )


def _close_quietly(conn: Connection) -> None:
    with suppress(psycopg.Error, OSError):
        conn.close()


#: options whose values libpq checks only when it connects (then as an
#: "unreachable" database): checked here, before anything
_CHOICES = {
    "sslmode": ("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
    "gssencmode": ("disable", "prefer", "require"),
    "target_session_attrs": (
        "any",
        "read-write",
        "read-only",
        "primary",
        "standby",
        "prefer-standby",
    ),
    "load_balance_hosts": ("disable", "random"),
}


def check_conninfo(conninfo: str) -> None:
    """Refuse a connection string libpq cannot parse or would refuse when it
    connects, saying what is wrong without repeating it: libpq's own message
    may quote the token it choked on, which may be the password."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        options = conninfo_to_dict(conninfo)
    except psycopg.Error as exc:
        said = str(exc)
        if said.startswith("invalid URI query parameter"):
            name = said.split('"')[1] if '"' in said else "?"
            why = f"it has an unknown parameter {name!r}"
        elif said.startswith("invalid percent-encoded token"):
            why = "a % in a URL must be written %25"
        elif said.startswith('missing "="'):
            why = "it is neither a postgresql:// URL nor key=value pairs"
        else:
            why = "check its quoting"
        raise BadInput(f"the DSN is not a valid connection string: {why}") from None
    for port in str(options.get("port") or "").split(","):
        if port and not (port.isdigit() and 0 < int(port) < 65536):
            raise BadInput(f"the DSN's port {port[:20]!r} is not a port number (1 to 65535)")
    for name, allowed in _CHOICES.items():
        value = options.get(name)
        if value is not None and value not in allowed:
            raise BadInput(f"the DSN's {name} must be one of {', '.join(allowed)}")
    timeout = options.get("connect_timeout")
    if timeout is not None and not str(timeout).lstrip("-").isdigit():
        raise BadInput("the DSN's connect_timeout must be a whole number of seconds")


#: libpq options an environment variable may set that an empty or default
#: value cannot pin (a service must name one; these are timeouts and versions)
_UNPINNABLE = {
    "service",
    "connect_timeout",
    "sslcertmode",
    "min_protocol_version",
    "max_protocol_version",
}


def addresses(conninfo: str) -> tuple[list[str], list[str]]:
    """Where ``conninfo`` (with libpq's environment) leads: its TCP addresses
    as ``host:port``, and its Unix sockets' files (a sandboxed run reaches
    neither)."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        given = conninfo_to_dict(conninfo)
    except psycopg.Error:
        return [], []
    hosts = str(given.get("host") or os.environ.get("PGHOST") or "/var/run/postgresql")
    ports = str(given.get("port") or os.environ.get("PGPORT") or "5432").split(",")
    tcp, sockets = [], []
    for i, host in enumerate(hosts.split(",")):
        port = ports[i] if i < len(ports) else ports[-1]
        if host.startswith("/") or host.startswith("@"):
            sockets.append(os.path.join(host, f".s.PGSQL.{port}"))
        else:
            tcp.append(f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
    if given.get("hostaddr"):
        tcp += [f"{a}:{ports[0]}" for a in str(given["hostaddr"]).split(",")]
    return tcp, sockets


def socket_folders(db: Database) -> list[str] | None:
    """The folders of the server's own Unix sockets (its
    ``unix_socket_directories``, relative ones under its data folder left
    out); None when the role may not read them."""
    said = db.row("server_socket_folders")["folders"]
    if said is None:
        return None
    return [f.strip().strip('"') for f in str(said).split(",") if f.strip().startswith(("/", '"/'))]


def pinned_against_environment(conninfo: str) -> str:
    """``conninfo`` with each libpq option that the environment sets (PGHOSTADDR,
    PGOPTIONS, PGTARGETSESSIONATTRS, PGSSLMODE…) and the string does not,
    pinned to libpq's compiled default: for a DSN of our own making (the
    embedded server), which another server's variables must not steer."""
    import os

    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    given = conninfo_to_dict(conninfo)
    pinned = {}
    for option in psycopg.pq.Conninfo.get_defaults():
        keyword = option.keyword.decode()
        envvar = option.envvar.decode() if option.envvar else None
        steered = envvar is not None and envvar in os.environ and keyword not in given
        if steered and keyword not in _UNPINNABLE:
            pinned[keyword] = (option.compiled or b"").decode()
    return make_conninfo(conninfo, **pinned) if pinned else conninfo


def _pooler_key(conninfo: str) -> str:
    """Which server a DSN reaches (its hosts and ports), as a digest."""
    import hashlib

    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(conninfo)
    except psycopg.Error:
        return ""
    where = "|".join(str(parts.get(k, "")) for k in ("host", "hostaddr", "port"))
    return hashlib.sha256(where.encode("utf-8", "replace")).hexdigest()[:32]


def _poolers_file() -> Any:
    import os
    from pathlib import Path

    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "afk-watchdog" / "poolers-refusing-options"


def _known_pooler(conninfo: str) -> bool:
    """Whether this server refused startup options before (a pooler): every
    CLI call is a new process, and asking again would cost each of them a
    second connection and the pooler a warning."""
    try:
        known = _poolers_file().read_text().split()
    except (OSError, RuntimeError, UnicodeDecodeError):
        return False
    return _pooler_key(conninfo) in known


def _remember_pooler(conninfo: str) -> None:
    key = _pooler_key(conninfo)
    try:
        path = _poolers_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as out:
            out.write(key + "\n")
    except (OSError, RuntimeError):
        pass  # a home we cannot write to (a service): ask again next time


class Database:
    """Connections to one PostgreSQL database.

    It keeps up to ``pool_size`` connections (one when None, for a CLI
    command), opened on first use in the caller's thread. Every statement
    runs in autocommit mode unless the caller passes its own connection, whose
    transaction it then joins.

    Connections die: a server restart, a failover, a pooler restart, a
    flapping network. An idle connection the server has closed is never used
    (its socket is readable: a check without a round trip). A statement whose
    connection fails is run again on a new one, without waiting the first
    time and then with a short backoff, for up to ``retry_for`` seconds: any
    statement when the failure came before it was sent, and, when it came
    after, a statement marked ``retry`` in the SQL file (safe to repeat).
    Anything else surfaces as :class:`DatabaseError`, and so does a database
    this object has never reached: a wrong DSN fails at once.
    """

    def __init__(
        self,
        conninfo: str,
        *,
        pool_size: int | None = None,
        connect_timeout: float = 10,
        statement_timeout: float | None = None,
        application_name: str = "afk",
        retry_for: float = 30,
    ) -> None:
        check_conninfo(conninfo)
        self.conninfo = conninfo
        self._single = pool_size is None
        self._size = 1 if pool_size is None else max(1, pool_size)
        self._connect_timeout = connect_timeout
        self.retry_for = retry_for
        self._kwargs: dict[str, Any] = {"application_name": application_name}
        if statement_timeout is not None and not _known_pooler(conninfo):
            self._kwargs["options"] = f"-c statement_timeout={int(statement_timeout * 1000)}"
        self._idle: list[Connection] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(self._size)
        self._closed = False
        self._reached = False
        #: behind a connection pooler (None: not known yet)
        self.pooled: bool | None = None

    def __repr__(self) -> str:
        return f"Database({redact(self.conninfo)!r})"

    def connect(self, *, autocommit: bool = True) -> Connection:
        """A new connection of its own (the caller closes it)."""
        with translate_errors(self.conninfo):
            return self._open(autocommit)

    def _open(self, autocommit: bool = True) -> Connection:
        sent = dict(self._kwargs)  # another thread may drop the options meanwhile
        try:
            conn = self._connect(autocommit, sent)
        except psycopg.OperationalError as exc:
            if "options" not in sent or REFUSED_OPTIONS not in str(exc):
                raise
            self._options_refused()
            conn = self._connect(autocommit, self._kwargs)
        try:
            self._configure(conn)
        except BaseException:
            _close_quietly(conn)  # the server went away after the connect
            raise
        self._reached = True
        return conn

    def _connect(self, autocommit: bool, kwargs: dict[str, Any]) -> Connection:
        return psycopg.connect(
            self.conninfo,
            autocommit=autocommit,
            row_factory=dict_row,
            connect_timeout=max(1, int(self._connect_timeout)),
            **kwargs,
        )

    def _options_refused(self) -> None:
        """PgBouncer (1.18 and most poolers) refuses the ``options`` startup
        parameter that carries our statement_timeout. Connect without it: the
        pooler's own ``query_timeout`` or the role's ``statement_timeout``
        then bounds a statement."""
        with self._lock:
            if self._kwargs.pop("options", None) is None:
                return  # another thread learnt it first, and said so
        self.pooled = True
        _remember_pooler(self.conninfo)
        logger.info(
            "the server refused startup options (a connection pooler): "
            "connecting without a per-connection statement_timeout",
            extra={"action": "pooler"},
        )

    def _configure(self, conn: Connection) -> None:
        """Prepared statements live on one server connection, and a pooler in
        transaction mode runs each transaction on any of its server
        connections, where ``_pg3_0`` is missing or is another client's
        statement. A pooler hands its clients a backend key of its own, never
        the server's pid: where the two differ, prepared statements are off.
        A one-connection CLI command never repeats a statement enough for
        them to pay, and does not ask."""
        if self._single:
            conn.prepare_threshold = None
            return
        if self.pooled is None:
            row = conn.execute("SELECT pg_backend_pid() AS pid").fetchone()
            self.pooled = row is None or row["pid"] != conn.info.backend_pid
            if self.pooled:
                logger.info(
                    "connected through a pooler: prepared statements are off",
                    extra={"action": "pooler"},
                )
        if self.pooled:
            conn.prepare_threshold = None

    # -- the pool ---------------------------------------------------------

    @contextmanager
    def _checkout(self) -> Iterator[Connection]:
        """A connection of the pool's: an idle one that is still alive, else a
        new one. It goes back idle only if it is healthy and outside any
        transaction."""
        if not self._slots.acquire(timeout=self._connect_timeout):
            raise DatabaseError(
                f"all {self._size} connections were in use for {self._connect_timeout:g}s"
            )
        conn: Connection | None = None
        try:
            with self._lock:
                while self._idle and conn is None:
                    candidate = self._idle.pop()
                    if _alive(candidate):
                        conn = candidate
                    else:
                        _close_quietly(candidate)
            if conn is None:
                conn = self._open()
            yield conn
        finally:
            if conn is not None:
                keep = not self._closed and _reusable(conn)
                if keep:
                    with self._lock:
                        self._idle.append(conn)
                else:
                    _close_quietly(conn)
            self._slots.release()

    @contextmanager
    def connection(self, conn: Connection | None = None) -> Iterator[Connection]:
        if conn is not None:
            yield conn
            return
        with translate_errors(self.conninfo), self._checkout() as c:
            yield c

    def one(
        self, name: str, params: Mapping[str, Any] | None = None, conn: Connection | None = None
    ) -> Row | None:
        """Run a ``:one`` statement: its row, or None."""
        rows = self._run_named(name, "one", params, conn)
        if len(rows) > 1:
            raise DatabaseError(f"statement {name} returned {len(rows)} rows, not one")
        return rows[0] if rows else None

    def row(
        self, name: str, params: Mapping[str, Any] | None = None, conn: Connection | None = None
    ) -> Row:
        """Run a ``:row`` statement: its one row (a statement built to answer
        in any case; none is a bug, said as one)."""
        rows = self._run_named(name, "row", params, conn)
        if len(rows) != 1:
            raise DatabaseError(f"statement {name} returned {len(rows)} rows, not one")
        return rows[0]

    def all(
        self, name: str, params: Mapping[str, Any] | None = None, conn: Connection | None = None
    ) -> list[Row]:
        """Run a ``:many`` statement: its rows."""
        return self._run_named(name, "many", params, conn)

    def execute(
        self, name: str, params: Mapping[str, Any] | None = None, conn: Connection | None = None
    ) -> None:
        """Run an ``:exec`` statement."""
        self._run_named(name, "exec", params, conn)

    def _run_named(
        self, name: str, returns: str, params: Mapping[str, Any] | None, conn: Connection | None
    ) -> list[Row]:
        """Run the named statement in one round trip; return its rows as dicts.
        It must return what the caller expects, and take exactly the
        parameters given. On the caller's ``conn`` nothing is retried (its
        transaction is lost)."""
        statement = sql.checked_statement(name, params or {})
        if statement.returns != returns:
            raise TypeError(f"statement {name} is :{statement.returns}, not :{returns}")
        if conn is not None:
            with translate_errors(self.conninfo):
                return _run(conn, statement.text, params)
        deadline: float | None = None
        pause = 0.0
        while True:
            sent = False
            try:
                with translate_errors(self.conninfo), self._checkout() as c:
                    sent = True
                    return _run(c, statement.text, params)
            except DatabaseError as exc:
                cause = exc.__cause__
                lost = (not sent and not isinstance(cause, pg_errors.QueryCanceled)) or (
                    isinstance(cause, psycopg.Error) and _connection_lost(cause)
                )
                # a deadlock rolled the statement back (autocommit): it may
                # always run again (two finishes of tasks of two concurrency
                # keys, each claiming a task of the other's, can cross)
                undone = isinstance(cause, pg_errors.DeadlockDetected)
                if not undone and (not lost or (sent and not statement.retry) or not self._reached):
                    raise
                now = time.monotonic()
                deadline = deadline or now + self.retry_for
                if now >= deadline:
                    raise
                logger.info("retrying %s: %s", name, exc, extra={"action": "retry"})
                time.sleep(min(pause, deadline - now))
                pause = min(1.0, max(0.05, pause * 2))

    def copy(self, name: str, rows: Iterable[Sequence[Any]], conn: Connection) -> None:
        """Run a ``:copy`` statement (``COPY … FROM STDIN``), sending ``rows``,
        on the caller's connection (in its transaction: nothing is retried)."""
        statement = sql.statement(name)
        if statement.returns != "copy":
            raise TypeError(f"statement {name} is :{statement.returns}, not :copy")
        with translate_errors(self.conninfo), conn.cursor().copy(statement.text) as copy:
            for row in rows:
                copy.write_row(row)

    @contextmanager
    def transaction(self, conn: Connection | None = None) -> Iterator[Connection]:
        """A connection inside a transaction: committed when the block ends,
        rolled back if it raises. On the caller's ``conn``, a savepoint of
        its transaction, whose commit stays the caller's (an autocommit
        connection outside a transaction gets one of its own)."""
        if conn is not None and (
            conn.autocommit or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE
        ):
            with translate_errors(self.conninfo), conn.transaction():
                yield conn
            return
        if conn is not None:
            # a connection outside autocommit begins its transaction with its
            # first statement, and psycopg's transaction() would commit the
            # one it began: the savepoint by hand
            with translate_errors(self.conninfo):
                conn.execute("SAVEPOINT afk")
            try:
                yield conn
            except BaseException:
                with translate_errors(self.conninfo):
                    conn.execute("ROLLBACK TO SAVEPOINT afk")
                raise
            with translate_errors(self.conninfo):
                conn.execute("RELEASE SAVEPOINT afk")
            return
        with translate_errors(self.conninfo), self._checkout() as c, c.transaction():
            yield c

    def close(self) -> None:
        self._closed = True
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            _close_quietly(conn)

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
                "SELECT coalesce(max(version), 0) AS v FROM afk_schema_version"
            ).fetchone()
            return int(row["v"]) if row else 0
