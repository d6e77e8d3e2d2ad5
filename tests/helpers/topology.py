"""Real production parts started by the tests: PgBouncer in transaction
pooling in front of the test server, and a primary with a streaming standby.

Everything listens on 127.0.0.1 only, lives in a temporary folder and is
stopped (SIGKILL if need be) when the test ends.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from helpers.service import free_port

PGBIN = Path("/usr/lib/postgresql/15/bin")


def _owner_of(path: str) -> str | None:
    """The user to run a server as when we are root: the owner of the Unix
    socket folder it must reach (the embedded server's own user), else nobody.
    None when we are not root."""
    if os.geteuid() != 0:
        return None
    if path.startswith("/"):
        return pwd.getpwuid(os.stat(path).st_uid).pw_name
    return "nobody"


class PgBouncer:
    """pgbouncer in ``pool_mode = transaction`` in front of ``server_dsn``'s
    server, with a small pool so that clients really share server connections."""

    def __init__(self, pgbouncer: str, server_dsn: str, pool_size: int = 3) -> None:
        target = conninfo_to_dict(server_dsn)
        host = str(target.get("host") or "127.0.0.1")
        user = str(target.get("user") or "postgres")
        self.port = free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="afk-pgb-"))
        run_as = _owner_of(host)
        (self.folder / "users.txt").write_text(f'"{user}" ""\n')
        (self.folder / "pgbouncer.ini").write_text(
            "[databases]\n"
            f"* = host={host} port={target.get('port') or 5432}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\n"
            f"unix_socket_dir = {self.folder}\n"
            f"auth_type = trust\nauth_file = {self.folder / 'users.txt'}\n"
            "pool_mode = transaction\n"
            f"default_pool_size = {pool_size}\nmin_pool_size = 0\nreserve_pool_size = 0\n"
            "max_client_conn = 500\n"
            f"logfile = {self.folder / 'log'}\npidfile = {self.folder / 'pid'}\n"
            "admin_users = " + user + "\n"
        )
        os.chmod(self.folder, 0o755)
        for f in self.folder.iterdir():
            os.chmod(f, 0o644)
        if run_as:
            shutil.chown(self.folder, run_as)
        command = [
            pgbouncer,
            *(["-u", run_as] if run_as else []),
            str(self.folder / "pgbouncer.ini"),
        ]
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        self.user = user
        deadline = time.monotonic() + 15
        while True:
            try:
                psycopg.connect(self.dsn("pgbouncer"), connect_timeout=2).close()
                break
            except psycopg.Error:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("pgbouncer did not start: " + self.log()) from None
                time.sleep(0.05)

    def dsn(self, dbname: str) -> str:
        return make_conninfo(host="127.0.0.1", port=self.port, user=self.user, dbname=dbname)

    def for_database(self, dsn: str) -> str:
        """The pooled DSN of the database ``dsn`` names."""
        return self.dsn(str(conninfo_to_dict(dsn)["dbname"]))

    def log(self) -> str:
        path = self.folder / "log"
        return path.read_text() if path.exists() else ""

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


class Cluster:
    """A primary and a streaming standby of Debian's PostgreSQL 15 on
    127.0.0.1 (asynchronous replication, the default), run as the
    ``postgres`` user when we are root."""

    def __init__(self) -> None:
        for tool in ("initdb", "pg_ctl", "pg_basebackup"):
            if not (PGBIN / tool).exists():
                raise AssertionError(f"{PGBIN / tool} is missing: install postgresql-15")
        self.folder = Path(tempfile.mkdtemp(prefix="afk-ha-"))
        self.user = "postgres" if os.geteuid() == 0 else None
        os.chmod(self.folder, 0o755)
        if self.user:
            shutil.chown(self.folder, self.user)
        self.ports = {"a": free_port(), "b": free_port()}
        self._pg(
            "initdb",
            "-D",
            self.data("a"),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        )
        with open(self.data("a") / "postgresql.conf", "a") as conf:
            conf.write(
                "wal_level = replica\nmax_wal_senders = 5\nhot_standby = on\n"
                "fsync = off\nwal_keep_size = '256MB'\n"
                "max_connections = 60\n"
                # shared memory segments in the data folder, removed with it: a
                # SIGKILLed postmaster's /dev/shm segments would outlive the test
                "dynamic_shared_memory_type = mmap\n"
            )
        self.start("a")
        self._pg(
            "pg_basebackup",
            "-h",
            "127.0.0.1",
            "-p",
            str(self.ports["a"]),
            "-U",
            "postgres",
            "-D",
            self.data("b"),
            "-R",
            "-X",
            "stream",
            "--no-sync",
        )
        self.start("b")

    def data(self, node: str) -> Path:
        return self.folder / node

    def _pg(self, tool: str, *args: object, check: bool = True) -> None:
        command = [str(PGBIN / tool), *map(str, args)]
        if self.user:
            command = ["runuser", "-u", self.user, "--", *command]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=60)
        if check and proc.returncode != 0:
            logs = "".join(f"\n{log.name}:\n{log.read_text()}" for log in self.folder.glob("*.log"))
            raise AssertionError(f"{tool} failed: {proc.stderr}{proc.stdout}{logs}")

    def start(self, node: str) -> None:
        self._pg(
            "pg_ctl",
            "-D",
            self.data(node),
            "-l",
            self.folder / f"{node}.log",
            "-w",
            "-o",
            f"-p {self.ports[node]} -k {self.folder} -c listen_addresses=127.0.0.1",
            "start",
        )

    def stop(self, node: str) -> None:
        self._pg("pg_ctl", "-D", self.data(node), "-m", "fast", "-w", "stop", check=False)

    def kill(self, node: str) -> None:
        """SIGKILL the postmaster, as a crash would: no shutdown checkpoint,
        no last WAL sent."""
        pid = int((self.data(node) / "postmaster.pid").read_text().split()[0])
        os.kill(pid, signal.SIGKILL)

    def promote(self, node: str) -> None:
        self._pg("pg_ctl", "-D", self.data(node), "-w", "promote")

    def dsn(self, node: str, dbname: str = "postgres") -> str:
        return make_conninfo(
            host="127.0.0.1", port=self.ports[node], user="postgres", dbname=dbname
        )

    def multi_dsn(self, dbname: str = "postgres") -> str:
        """What clients use: both hosts, whichever accepts writes."""
        return make_conninfo(
            host="127.0.0.1,127.0.0.1",
            port=f"{self.ports['a']},{self.ports['b']}",
            user="postgres",
            dbname=dbname,
            target_session_attrs="read-write",
        )

    def caught_up(self) -> bool:
        """The standby has replayed everything the primary has written."""
        with psycopg.connect(self.dsn("a"), autocommit=True) as p:
            row = p.execute("SELECT pg_current_wal_lsn()").fetchone()
        with psycopg.connect(self.dsn("b"), autocommit=True) as s:
            done = s.execute(
                "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (row[0] if row else None,)
            ).fetchone()
        return bool(done and done[0])

    def close(self) -> None:
        for node in ("a", "b"):
            pidfile = self.data(node) / "postmaster.pid"
            if pidfile.exists():
                self._pg("pg_ctl", "-D", self.data(node), "-m", "immediate", "stop", check=False)
        shutil.rmtree(self.folder, ignore_errors=True)
