"""Set-up and the service: migrate, db, doctor, demo, watchdog, digest."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import logs
from ..config import (
    DigestSettings,
    LoopSettings,
    QueueSettings,
    ServiceSettings,
    describe,
    no_destination,
    parse_duration,
)
from ..errors import EXIT_ERROR, EXIT_OK, BadInput
from ..jobs import JOBS

if TYPE_CHECKING:
    pass
from .common import (
    MAX_SINCE,
    Parser,
    Resources,
    boundary_options,
    common_options,
    duration_arg,
    emit,
    newer_schema,
)


def cmd_migrate(args: argparse.Namespace, res: Resources) -> int:

    q = res.queue
    applied = q.migrate()
    emit({"applied": applied, "version": q.db.schema_version()})
    newer_schema(q.db)
    return EXIT_OK


def configure_db(p: Parser) -> None:
    p.add_argument("action", choices=["status", "start", "stop"])


def cmd_db(args: argparse.Namespace, res: Resources) -> int:
    from .. import embedded

    afk_home = embedded.home()
    if args.action == "stop":
        emit({"stopped": embedded.stop(afk_home)})
        return EXIT_OK
    info: embedded.ServerInfo | None
    if args.action == "start":
        info = embedded.ensure_running(afk_home)
    else:
        info = embedded.running(afk_home / "pgdata")
    emit(
        {
            "running": info is not None,
            "pgdata": str(afk_home / "pgdata"),
            "dsn": info.dsn() if info else None,
            "pid": info.pid if info else None,
        }
    )
    return EXIT_OK


def configure_watchdog(p: Parser) -> None:
    p.description = (
        "The watchdog service: reclaim, gauges, poison pills, prune, and Prometheus metrics."
    )
    p.epilog = SETTINGS_POINTER
    wsub = p.add_subparsers(dest="action", required=True, parser_class=Parser)
    run = wsub.add_parser(
        "run",
        parents=[common_options()],
        help="run the service (until SIGTERM)",
        epilog=SETTINGS_POINTER,
    )
    run.add_argument(
        "--notify-every",
        type=duration_arg,
        dest="notify_every",
        metavar="DURATION",
        help="when many approval requests pile up, one summary at most this often "
        "(env AFK_DIGEST_NOTIFY_EVERY, default 15m)",
    )
    tick = wsub.add_parser(
        "tick",
        parents=[common_options()],
        help="run one job once and exit (non-zero if it failed)",
    )

    tick.add_argument("job", choices=[job.name for job in JOBS if job.tick])
    wsub.add_parser(
        "settings",
        parents=[common_options()],
        help="print every setting: its environment variable, its default and what it does",
    )


def configure_web(p: Parser) -> None:
    sub = p.add_subparsers(dest="action", required=True, parser_class=Parser)
    token = sub.add_parser(
        "token",
        parents=[common_options()],
        help="a login token for the status pages' actions (approve, deny, answer, retry, "
        "cancel, clear an account): printed once, kept hashed",
    )
    token.add_argument("--name", required=True, help="who signs in with it (their history name)")


def cmd_web(args: argparse.Namespace, res: Resources) -> int:
    from ..web import add_login

    token = add_login(res.queue.db, args.name)
    emit({"name": args.name, "token": token, "sign_in": "/login on the status pages"})
    return EXIT_OK


#: where `afk watchdog --help` sends a person for the settings (P34: the
#: table itself is 75 lines, too long for a help)
SETTINGS_POINTER = (
    "Every setting is an environment variable (or a key of the --config file): "
    "`afk watchdog settings` prints them with their defaults; "
    "docs/reference/settings.md says more."
)


def settings_help() -> str:
    """Every setting with its variable and default: `afk watchdog settings`."""

    lines = ["settings (env var, default):"]
    for cls in (ServiceSettings, QueueSettings, LoopSettings, DigestSettings):
        for env, default, text in describe(cls):
            lines.append(f"  {env:<28} {default!s:<16} {text}")
    lines += [
        "  AFK_CONFIG                   -                a TOML file of the same settings "
        "(lower-case names; env vars win)",
        "  AFK_DSN                      embedded         PostgreSQL connection string",
        "  AFK_LOG_LEVEL                INFO/WARNING     log level (the service: INFO; "
        "other commands: WARNING)",
    ]
    return "\n".join(lines)


def cmd_watchdog(args: argparse.Namespace, res: Resources) -> int:
    from ..service import Watchdog

    if args.action == "settings":
        print(settings_help())
        return EXIT_OK
    settings = res.settings
    if getattr(args, "notify_every", None) is not None:
        settings = replace(
            settings, digest=replace(settings.digest, notify_every=args.notify_every)
        )
    settings.check_service()
    dsn = res.dsn
    logs.configure(os.environ.get("AFK_LOG_LEVEL", "INFO"), settings.service.log_format, dsn)
    watchdog = Watchdog(dsn, settings)
    if args.action == "tick":
        outcome = watchdog.run_job(args.job)
        watchdog.close()
        emit(outcome.to_json())
        return EXIT_OK if outcome.ok else EXIT_ERROR

    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    clean = watchdog.run(stop)
    if not clean:
        # a job thread is stuck in a statement: do not wait for it at exit
        sys.stderr.flush()
        os._exit(EXIT_OK)
    return EXIT_OK


def configure_doctor(p: Parser) -> None:
    p.add_argument("--json", action="store_true", help="the checks as a JSON list")
    p.add_argument("--project", help="the project folder to look in (default: here)")
    p.add_argument(
        "--live",
        action="store_true",
        help="fire each installed hook as its agent would, for a task that does not exist: "
        "each must answer in its shape, in time, through the service",
    )
    p.add_argument(
        "--sandbox",
        action="store_true",
        help="prove afk loop --sandbox's boundary on this machine with probes run through "
        "it as a run would be: a write outside the worktree, a read of ~/.ssh and of afk's "
        "home, the database's address and a host not on the list must fail; each allowed "
        "host (the model API's, or --allow-host) must be reached",
    )
    boundary_options(p, probed=True)


def cmd_doctor(args: argparse.Namespace, res: Resources) -> int:
    from .. import doctor

    checks = doctor.run(
        res.dsn,
        res.settings,
        Path(args.project or os.getcwd()),
        Path.home(),
        # as a hook of this command's database asks the service
        hook_argv=[
            *(["--config", str(Path(args.config).resolve())] if args.config else []),
            *(["--dsn", args.dsn] if args.dsn else []),
        ],
        live=args.live,
    )
    if args.sandbox:
        checks += sandbox_probes(args, res)
    if args.json:
        emit([c.to_json() for c in checks])
    else:
        for check in checks:
            print(check.line())
    return EXIT_OK if all(c.ok for c in checks) else EXIT_ERROR


def sandbox_probes(args: argparse.Namespace, res: Resources) -> list[Any]:
    """`afk doctor --sandbox`: the loop's boundary, built as `afk loop
    --sandbox` builds it, proved with probes; a missing engine is a failed
    check that says what to install."""
    from .. import doctor
    from ..agents.checkup import Check
    from ..agents.sandbox import INSTALL, EngineMissing
    from .agents import boundary_of

    try:
        boundary = boundary_of(args, res)
    except EngineMissing as exc:
        return [
            Check("sandbox", False, f"the sandbox engine {exc.engine!r} is not installed", INSTALL)
        ]
    except BadInput as exc:
        return [Check("sandbox", False, str(exc))]
    return doctor.check_sandbox_probes(boundary, res.dsn, os.environ)


def configure_digest(p: Parser) -> None:
    p.add_argument(
        "action",
        nargs="?",
        choices=["send", "status"],
        help="send: deliver the due digest now; status: recent deliveries",
    )
    p.add_argument("--dry-run", action="store_true", help="print what would be sent now")
    p.add_argument(
        "--since",
        help="with --dry-run: a window of the last DURATION (e.g. 24h, 7d) instead of "
        "the one since the last digest went out",
    )
    p.add_argument(
        "--format",
        choices=["slack", "html", "text", "webhook"],
        help="of the printed digest (default text)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="with send: send even if this period's digest was delivered",
    )


def cmd_digest(args: argparse.Namespace, res: Resources) -> int:
    from .. import delivery

    # every check of the arguments first: bad input reaches no database
    if args.force and args.action != "send":
        raise BadInput("--force goes with `afk digest send`")
    if args.dry_run and args.action is not None:
        raise BadInput(
            "--dry-run prints a digest; it cannot be combined with send, status or --force"
        )
    if args.format is not None and args.action is not None:
        raise BadInput("--format goes with --dry-run (or no action): what is printed")
    since = None
    if args.since is not None:
        if args.action is not None:
            raise BadInput("--since goes with --dry-run (or no action): the window printed")
        since = parse_duration(args.since)
        if since <= 0 or since > MAX_SINCE:
            raise BadInput(f"--since {args.since}: a duration above 0 and at most 100 years")
    settings = res.settings
    if args.action == "send" and not settings.digest.destinations():
        raise BadInput(no_destination())
    db = res.database()
    if args.dry_run or args.action is None:
        lost_after = settings.loop.fleet_lost_seconds
        text, note = delivery.dry_run(
            db, settings.digest, args.format or "text", lost_after, since_seconds=since
        )
        sys.stdout.write(text)
        print(f"afk: {note}", file=sys.stderr)
        return EXIT_OK
    if args.action == "status":
        emit(delivery.status(db))
        return EXIT_OK
    outcomes = delivery.send_due(
        db, settings.digest, force=args.force, lost_after=settings.loop.fleet_lost_seconds
    )
    emit({"deliveries": [o.to_json() for o in outcomes]})
    if not outcomes:
        print(
            "afk: nothing to send: this period's digest was delivered already, is "
            "waiting for a retry, or is being sent (--force sends anyway)",
            file=sys.stderr,
        )
    return EXIT_OK if all(o.state == "delivered" for o in outcomes) else EXIT_ERROR


def cmd_demo(args: argparse.Namespace, res: Resources) -> int:
    from ..demo import run

    return run(res.dsn)
