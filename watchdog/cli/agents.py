"""The agent commands: loop (supervise an agent over the backlog), limit
(park and clear accounts), hooks (install them) and hook (run one)."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..agents import harnesses, hooklink, reach
from ..agents.harnesses import HARNESS_LABEL, HARNESSES, SETTINGS
from ..checks import check_id, check_label
from ..config import ON_APPROVAL_TIMEOUT, approval_ttl_problem, parse_duration
from ..errors import EXIT_OK, AfkError, BadInput, dsn_secrets, redact, scrub

if TYPE_CHECKING:
    from ..agents import hooks

from .common import (
    Parser,
    Resources,
    account_of,
    account_option,
    agent_of,
    agent_option,
    boundary_options,
    cap_arg,
    checked_verify,
    common_options,
    duration_arg,
    emit,
    lease_option,
    parse_when,
    runner_of,
    runner_option,
    say,
    workspace_options,
    workspace_request,
)


def configure_hooks(p: Parser) -> None:
    p.add_argument("agent_kind", choices=list(SETTINGS), help="the agent")
    p.add_argument(
        "--install",
        metavar="PATH",
        help="merge into this settings file (e.g. .claude/settings.json, .codex/hooks.json, "
        ".gemini/settings.json, .cursor/hooks.json, .github/hooks/afk.json)",
    )
    p.add_argument(
        "--gate",
        action="store_true",
        help="Stop blocks (a few times at most) a "
        "session that still holds a task it claimed itself",
    )
    p.add_argument(
        "--transport",
        choices=["command", "http"],
        default="command",
        help="claude only: http posts each hook to the watchdog service (AFK_HOOK_HTTP) "
        "instead of starting a process; SessionStart stays a command",
    )
    p.add_argument(
        "--fail-closed",
        action="store_true",
        dest="fail_closed",
        help="with --transport http: a PreToolUse the service does not answer blocks the "
        "tool call (Claude Code 2.1.295 and later)",
    )


def cmd_hooks(args: argparse.Namespace, res: Resources) -> int:

    # the hooks run afk's entry point by the interpreter this afk runs in
    afk = os.path.abspath(sys.executable)
    if args.transport == "http" or args.fail_closed:
        ours = http_hook_settings(args, afk, res)
    else:
        ours = harnesses.SETTINGS[args.agent_kind](afk, args.gate, hook_database_args(args))
    if args.install is None:
        emit(ours)
        return EXIT_OK
    written = harnesses.install(Path(args.install), ours)
    print(f"afk: installed the {', '.join(ours['hooks'])} hooks in {written}", file=sys.stderr)
    return EXIT_OK


def http_hook_settings(args: argparse.Namespace, afk: str, res: Resources) -> dict[str, Any]:
    """`afk hooks claude --transport http`: the service's address from the
    settings (AFK_HOOK_HTTP), the token by name only."""

    if not harnesses.BY_NAME[args.agent_kind].http_hooks:
        takes = [h.name for h in harnesses.HARNESS_TABLE if h.http_hooks]
        raise BadInput(
            f"--transport http is for {', '.join(takes)} (the harnesses with HTTP hooks)"
        )
    if args.transport != "http":
        raise BadInput("--fail-closed goes with --transport http")
    service = res.settings.service
    if not service.hook_http:
        raise BadInput(
            "--transport http needs the watchdog service's hook address: set AFK_HOOK_HTTP "
            "(e.g. 127.0.0.1:18735) and AFK_HOOK_TOKEN, for the service and here"
        )
    host, port = service.hook_http_host_port()
    shown = f"[{host}]" if ":" in host else host
    return harnesses.claude_http_settings(
        afk,
        args.gate,
        hook_database_args(args),
        f"http://{shown}:{port}",
        fail_closed=args.fail_closed,
    )


def hook_database_args(args: argparse.Namespace) -> tuple[str, ...]:
    """What the installed hooks need to reach the database this command was
    told of: ``--config`` as an absolute path, ``--dsn`` unless it holds a
    password (a settings file is no place for one)."""

    out: tuple[str, ...] = ()
    if args.config is not None:
        path = Path(args.config)
        if not path.is_file():
            raise BadInput(f"--config {args.config}: no such file")
        out += ("--config", str(path.resolve()))
    if args.dsn is not None:
        if not args.dsn.strip():
            raise BadInput("--dsn is empty")
        if dsn_secrets(args.dsn):
            raise BadInput(
                "--dsn holds a password, which would be written into the settings file: "
                "put the DSN in a config file and pass --config instead"
            )
        out += ("--dsn", args.dsn)
    return out


def configure_hook(p: Parser) -> None:
    p.add_argument(
        "event", nargs="?", choices=["stop"], help="accepted for settings written by older versions"
    )
    p.add_argument("--gate", action="store_true", help="the Stop completion gate")
    p.add_argument(
        "--harness",
        choices=HARNESSES,
        default="claude",
        help="whose payloads (claude: Claude Code and Codex CLI; gemini: Gemini CLI; "
        "cursor: Cursor; copilot: GitHub Copilot CLI)",
    )


def cmd_hook(args: argparse.Namespace, res: Resources) -> int:
    """An agent hook: one payload on stdin, acted on by its hook_event_name.
    Always exits 0, within the hook's timeout: a hook must never wedge the
    agent. The only refusals are a deliberate deny (PreToolUse) or block
    (the Stop gate), written as JSON on stdout."""
    from ..agents import hooks

    signal.signal(signal.SIGALRM, hooklink.give_up)
    # the deadline counts from the process's start (`afk hook` may have asked
    # the watchdog service first)
    signal.alarm(signal.alarm(0) or hooklink.HOOK_DEADLINE)
    hooklink.touch_alive(os.environ)
    try:
        raw = getattr(args, "payload", None)
        reply = hooks.run_hook(
            raw if raw is not None else hooklink.read_stdin(),
            gate=args.gate,
            alias=args.event,
            harness=args.harness,
            env=os.environ,
            where=lambda ctx: _hook_database(args, res, ctx),
        )
        sys.stderr.write(reply.stderr())
        sys.stdout.write(reply.stdout())  # (nothing where the harness would not read it)
    except AfkError as exc:
        print(f"afk hook: warning: {exc}; nothing was changed", file=sys.stderr)
    except Exception as exc:  # never fail the agent's hook, never print a secret
        print(
            f"afk hook: warning: {type(exc).__name__}: {redact(str(exc))}; nothing was changed",
            file=sys.stderr,
        )
    finally:
        signal.alarm(0)
    return EXIT_OK


def _hook_database(
    args: argparse.Namespace, res: Resources, ctx: hooks.Context
) -> hooks.Where | hooks.Reply:
    """Where `afk hook` answers a hook (hooks.run_hook's ``where``): the
    running database of its settings. A hook the agent does not wait for
    goes on in a child of its own, and the parent exits at once."""
    from ..agents import hooks
    from ..resolve import running_dsn

    if hooks.detached(ctx) and _detach():
        return hooks.Reply()  # (the parent: the child goes on and answers)
    dsn = running_dsn(args.dsn, settings=res.settings, note=say)
    if dsn is None:
        return hooks.Reply(
            lines=[
                "afk hook: warning: no database: the embedded server is not running "
                "(`afk db start`) and no DSN is set; nothing was recorded"
            ]
        )
    return dsn, res.settings, None


def configure_limit(p: Parser) -> None:
    p.add_argument("--account", help="the account (an agent login, an API key)")
    p.add_argument("--until", help="park until this ISO 8601 time")
    p.add_argument("--reason", help="why, with --until")
    p.add_argument("--clear", action="store_true", help="unpark the account")


def cmd_limit(args: argparse.Namespace, res: Resources) -> int:
    from ..agents.accounts import Accounts

    if args.clear and (args.until is not None or args.reason is not None):
        raise BadInput("--clear cannot be combined with --until or --reason")
    if (args.clear or args.until is not None) and args.account is None:
        raise BadInput("--account is needed with --until or --clear")
    if args.reason is not None and args.until is None:
        raise BadInput("--reason goes with --until")
    until = parse_when(args.until) if args.until is not None else None
    accounts = Accounts(res.queue.db)
    if args.clear:
        cleared = accounts.clear(args.account, who=os.environ.get("USER"))
        emit({"cleared": [p.to_json() for p in cleared]})
        if not cleared:
            print(f"afk: account {args.account!r} was not parked", file=sys.stderr)
        return EXIT_OK
    if until is not None:
        reason = args.reason or f"parked by hand by {os.environ.get('USER') or 'a person'}"
        emit(accounts.park_by_hand(args.account, reason, until).to_json())
        return EXIT_OK
    emit([p.to_json() for p in accounts.parked(args.account)])
    return EXIT_OK


def configure_loop(p: Parser) -> None:
    agent_option(p)
    runner_option(p)
    account_option(p)
    lease_option(p)
    p.add_argument("--wait", action="store_true", help="keep running, waiting for new tasks")
    p.add_argument("--max-tasks", type=int, dest="max_tasks", help="stop after this many runs")
    p.add_argument(
        "--stall-after",
        type=duration_arg,
        dest="stall_after",
        metavar="DURATION",
        help="stop a run whose agent printed no line and fired no hook for this long "
        "(90s, 15m, 2h; env AFK_STALL_SECONDS, default 15m)",
    )
    p.add_argument(
        "--max-run",
        type=cap_arg,
        dest="max_run",
        metavar="DURATION",
        help="stop a run still going after this long, an attempt spent "
        "(0: no cap; env AFK_MAX_RUN_SECONDS; default: no cap)",
    )
    workspace_options(p, branch=False)
    p.add_argument(
        "--sandbox",
        action="store_true",
        default=None,
        help="run every run (and its check) inside the sandbox runtime (srt): writes only "
        "in its worktree, no read of afk's home or your keys, the network only to its "
        "model API and --allow-host (env AFK_SANDBOX)",
    )
    boundary_options(p)
    p.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="LABEL",
        help="what this machine offers (gpu, linux): a task that --requires labels is taken "
        "only by a loop that has every one; give it again for more",
    )
    p.add_argument(
        "--profile",
        action="append",
        dest="profile",
        metavar="NAME",
        help="run under this profile (afk profile add); give it again for more: each run "
        "goes to the first whose account is not parked (instead of -- CMD)",
    )
    p.add_argument(
        "--switch-after",
        dest="switch_after",
        metavar="DURATION",
        help="with --profile: how long a task whose session a parked profile holds waits "
        "for that profile's reset before it moves to another and starts fresh from its "
        "brief (default 15m; 0: at once)",
    )
    p.add_argument(
        "--ask-for",
        action="append",
        dest="ask_for",
        metavar="RULE",
        help="a tool call a person must approve, as Claude Code writes a permission rule "
        "(Bash(git push:*), Bash(rm -rf:*), WebFetch, mcp__deploy__*): deferred, the task "
        "held until afk approve or afk deny, the same session then resumed; give it again "
        "for more (env AFK_ASK_FOR, one a line)",
    )
    p.add_argument(
        "--approval-ttl",
        type=duration_arg,
        dest="approval_ttl",
        metavar="DURATION",
        help="how long a request waits for a person (env AFK_APPROVAL_TTL_SECONDS, default 12h)",
    )
    p.add_argument(
        "--on-approval-timeout",
        dest="on_approval_timeout",
        choices=list(ON_APPROVAL_TIMEOUT),
        help="a request no one decided in time: denied (the default; env "
        "AFK_ON_APPROVAL_TIMEOUT), or held until someone does",
    )
    p.add_argument(
        "--unsandboxed",
        action="store_true",
        help="run an agent command that turns its harness's permission checks off "
        "(--dangerously-skip-permissions, --yolo...) with no boundary around it: "
        "you know it acts on this machine as you",
    )
    p.set_defaults(command=[])
    p.usage = (
        "afk loop --agent A [--account NAME] [--lease S] [--wait] [--max-tasks N] "
        "[--stall-after DURATION] [--max-run DURATION] [--repo PATH] [--verify CMD] "
        "[--require-changes] [--sandbox [--allow-host HOST[:PORT]]... [--deny-read PATH]...] "
        "[--unsandboxed] [--ask-for RULE]... [--approval-ttl DURATION] "
        "[--on-approval-timeout deny|hold] [--label LABEL]... "
        "(-- CMD [ARG...] | --profile NAME... [--switch-after DURATION])"
    )
    p.epilog = (
        "exit 0 when nothing is left, 5 when the account needs a person, 130/143 when stopped"
    )


def cmd_loop(args: argparse.Namespace, res: Resources) -> int:
    from ..agents.accounts import DEFAULT_ACCOUNT, Accounts
    from ..agents.broker import Broker
    from ..agents.loop import Loop, LoopOptions
    from ..agents.outcome import reading_zone
    from ..agents.process import become_subreaper

    if args.profile and args.command:
        raise BadInput("give --profile or -- CMD, not both (afk profile add makes one of a CMD)")
    if not args.command and not args.profile:
        raise BadInput("no agent command given: afk loop --agent A -- CMD [ARG...]")
    if args.max_tasks is not None and args.max_tasks < 1:
        raise BadInput("--max-tasks must be at least 1")
    settings = res.settings
    sandboxed = settings.loop.sandbox if args.sandbox is None else args.sandbox
    if (args.allow_host or args.deny_read) and not sandboxed:
        raise BadInput("--allow-host and --deny-read go with --sandbox")
    switch_after = switch_after_of(args.switch_after, bool(args.profile))
    profiles = profiles_of(res, args.profile or [])
    project = Path(args.repo or os.getcwd())
    for command in [list(args.command)] if args.command else [p.command for p in profiles]:
        skips = harnesses.skips_permissions(command) or harnesses.skips_in_settings(
            command, project, Path.home()
        )
        if skips is not None and not args.unsandboxed and not sandboxed:
            raise BadInput(
                f"the agent command turns its harness's permission checks off ({skips}): "
                "such an agent needs a boundary around it; nothing was claimed "
                "(--unsandboxed runs it anyway, on this machine, as you)"
            )
    agent = agent_of(args)
    assert agent is not None
    boundary = boundary_of(args, res) if sandboxed else None
    ask_for = ask_for_of(args.ask_for, settings.loop.ask_for)
    # (the settings' own check holds AFK_APPROVAL_TTL_SECONDS and
    # AFK_ON_APPROVAL_TIMEOUT to the same rules as these flags: config.py)
    on_timeout = args.on_approval_timeout or settings.loop.on_approval_timeout
    ttl = args.approval_ttl if args.approval_ttl is not None else settings.loop.approval_ttl_seconds
    wrong = approval_ttl_problem(ttl)
    if wrong is not None:
        raise BadInput(f"--approval-ttl {wrong}")

    zone = settings.digest.day_zone()
    if profiles and account_of(args):
        raise BadInput("--account goes with -- CMD: a profile names its own account")
    first = profiles[0] if profiles else None
    options = LoopOptions(
        agent=agent,
        command=list(args.command) if first is None else list(first.command),
        account=(account_of(args) or DEFAULT_ACCOUNT) if first is None else first.account,
        lease=args.lease,
        wait=args.wait,
        max_tasks=args.max_tasks,
        runner=runner_of(args),
        day_zone=getattr(zone, "key", None) or str(zone),
        stall_after=args.stall_after,
        max_run=args.max_run,
        workspace=workspace_request(args.repo),
        verify=checked_verify(args.verify),
        require_changes=args.require_changes,
        boundary=boundary,
        ask_for=ask_for,
        approval_ttl=ttl,
        on_approval_timeout=on_timeout,
        profiles=profiles,
        labels=[loop_label(label) for label in dict.fromkeys(args.label)],
        switch_after=switch_after,
    )
    from ..queue import Queue

    check_id("account", options.account)
    dsn = res.dsn
    queue = Queue(res.database(pool_size=2), settings=settings.queue)
    if settings.service.hook_http:  # (each run's HTTP hooks: a credential of its own)
        from ..delivery import link_secret

        options.hook_secret = link_secret(queue.db, "hooks")
    accounts = Accounts(queue.db)
    from .agentcli import AgentCli

    assert res.cli is not None  # (the bootstrap gives it)
    broker = Broker(queue.db.conninfo, settings, AgentCli(settings, *res.cli))
    if not broker.start():
        raise AfkError(f"cannot serve the agents' broker on {broker.path}")
    try:
        loop = Loop(
            queue,
            accounts,
            settings.loop,
            options,
            tz=reading_zone(),
            scrub=lambda text: scrub(text, dsn),
            alert=account_alert(queue.db, settings),
            broker=broker,
        )
        # what an agent starts with setsid or nohup is handed to this process,
        # which stops it after the run (P27)
        loop.subreaper = become_subreaper()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, loop.request_stop)
        return loop.run()
    finally:
        broker.stop()


def switch_after_of(given: str | None, profiles: bool) -> float:
    """--switch-after in seconds: from 0 to 7 days, with --profile only."""
    if given is None:
        return 15 * 60.0
    if not profiles:
        raise BadInput("--switch-after goes with --profile: a task moves between profiles")
    seconds = parse_duration(given)
    if not 0 <= seconds <= 7 * 86400:
        raise BadInput(f"--switch-after {given!r} must be from 0 to 7 days")
    return seconds


def loop_label(label: str) -> str:
    """A --label, checked; harness:NAME is not one a person gives (the loop
    offers it for its own harnesses, which a task's --harness asks for)."""
    label = check_label(label)
    if label.startswith(HARNESS_LABEL):
        raise BadInput(
            f"--label {label}: the loop offers harness:NAME itself, for the harness of each "
            "of its profiles (or of its -- CMD)"
        )
    return label


def profiles_of(res: Resources, names: list[str]) -> list[Any]:
    """The loop's --profile, each checked before anything is claimed: it
    exists, and its command can be found (as -- CMD is)."""
    if not names:
        return []
    if len(set(names)) != len(names):
        raise BadInput("--profile names one profile twice")
    from ..agents.profiles import Profiles

    profiles = Profiles(res.queue.db).named(names)
    for p in profiles:
        program = p.command[0]
        found = shutil.which(program) if os.sep not in program else program
        if not found or not os.access(found, os.X_OK):
            raise BadInput(
                f"profile {p.name!r}: its command {program!r} cannot be found or run; "
                "nothing was claimed"
            )
    return profiles


def configure_loops(p: Parser) -> None:
    p.add_argument("--json", action="store_true", help="as JSON")


def cmd_loops(args: argparse.Namespace, res: Resources) -> int:
    """The fleet: each loop registered (alive, or lost when it stopped
    beating), the task and profile it runs, and each account's parking."""
    from ..agents.accounts import Accounts
    from ..agents.fleet import Fleet
    from ..agents.outcome import reading_zone

    loops = Fleet(res.queue.db, res.settings.loop.fleet_lost_seconds).loops()
    parked = {p.account: p.to_json() for p in Accounts(res.queue.db).parked()}
    rows = [{**r, "task_id": str(r["task_id"]) if r["task_id"] else None} for r in loops]
    if args.json:
        emit({"loops": rows, "parked": list(parked.values())})
        return EXIT_OK
    for r in rows:
        doing = f"runs {r['task_title']!r}" if r["task_title"] else "between tasks"
        profile = f" under {r['profile']}" if r["profile"] else ""
        labels = f" [{', '.join(r['labels'])}]" if r["labels"] else ""
        print(
            f"{r['state']:5} {r['agent_id']} {r['runner']} on {r['host']} (pid {r['pid']}, "
            f"{r['username'] or '?'}){labels}: {doing}{profile}; seen {r['seen_at']:%H:%M:%S}"
        )
    zone = reading_zone()
    for account, p in parked.items():
        ends = p.get("limited_until")
        until = (
            f"{datetime.fromisoformat(ends).astimezone(zone):%Y-%m-%d %H:%M %Z}"
            if ends
            else "a person clears it"
        )
        print(f"parked {account}: {p.get('kind')} until {until}")
    if not rows:
        print("no loop is registered")
    return EXIT_OK


def configure_profile(p: Parser) -> None:
    sub = p.add_subparsers(dest="action", required=True, parser_class=Parser)
    add = sub.add_parser("add", parents=[common_options()], help="record a way to run an agent")
    add.add_argument("name", help="the profile's name (its account's too, unless --account)")
    add.add_argument("--harness", help="claude, codex, gemini, cursor, copilot (read from CMD)")
    add.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="K=V",
        help="a variable its runs need that is not a secret (CLAUDE_CONFIG_DIR=~/.claude-2)",
    )
    add.add_argument("--account", help="the account its usage limits park (default: its name)")
    add.set_defaults(command=[])
    add.usage = "afk profile add NAME [--harness H] [--env K=V]... [--account A] -- CMD [ARG...]"
    sub.add_parser("list", parents=[common_options()], help="the profiles")
    for verb, text in (("show", "one profile"), ("remove", "remove a profile")):
        one = sub.add_parser(verb, parents=[common_options()], help=text)
        one.add_argument("name")
    login = sub.add_parser(
        "login",
        parents=[common_options()],
        help="log a profile's harness in where its sandboxed runs keep their state (its own "
        "folder, not yours): runs the harness there, for you to log in",
    )
    login.add_argument("name", help=f"the profile ({reach.DEFAULT_PROFILE}: a loop's -- CMD)")
    login.add_argument("--harness", default="claude", help="with default: whose (claude)")
    login.set_defaults(command=[])
    login.usage = "afk profile login NAME [--harness H] [-- ARG...]"


def cmd_profile(args: argparse.Namespace, res: Resources) -> int:
    from ..agents.profiles import Profiles

    if args.action == "login":  # (the default profile's needs no database)
        return profile_login(lambda: Profiles(res.queue.db), args)
    profiles = Profiles(res.queue.db)
    if args.action == "add":
        made = profiles.add(
            args.name, args.command, harness=args.harness, env=args.env, account=args.account
        )
        emit(made.to_json())
    elif args.action == "list":
        emit([p.to_json() for p in profiles.all()])
    elif args.action == "show":
        emit(profiles.named([args.name])[0].to_json())
    else:
        profiles.remove(args.name)
        emit({"removed": args.name})
    return EXIT_OK


def profile_login(profiles: Callable[[], Any], args: argparse.Namespace) -> int:
    """`afk profile login NAME`: the profile's harness run (with the person's
    terminal, and ARGs after --) where the profile's sandboxed runs keep
    their state: the folder its --env names, else afk's for it. afk stores
    no credential: the harness keeps its login there."""
    import subprocess

    from ..embedded import private, profile_home

    if args.name == reach.DEFAULT_PROFILE:
        harness = harnesses.BY_NAME.get(args.harness)
        if harness is None:
            raise BadInput(f"--harness {args.harness!r}: one of {', '.join(harnesses.BY_NAME)}")
        program, env = harness.command, {}
    else:
        (profile,) = profiles().named([args.name])
        harness = harnesses.BY_NAME.get(profile.harness)
        program, env = profile.command[0], dict(profile.env)
    if harness is None or harness.home_variable is None:
        raise BadInput(
            f"{args.name}: its harness keeps its state where its own (~/.{args.harness}) is: "
            "log in as you do by hand"
        )
    folder = env.get(harness.home_variable) or str(profile_home(args.name, harness.name))
    private(Path(os.path.expanduser(folder)))
    given = {**os.environ, **env, harness.home_variable: os.path.expanduser(folder)}
    print(f"afk: {harness.home_variable}={folder}: log in there, then exit", file=sys.stderr)
    try:
        return subprocess.run([program, *args.command], env=given).returncode
    except OSError as exc:
        raise BadInput(f"cannot run {program!r}: {exc.strerror or exc}") from None


def ask_for_of(given: list[str] | None, setting: str) -> list[str]:
    """The loop's --ask-for rules (its setting's, one a line, then the
    command line's), each read as a permission rule: one that does not read
    is one line, exit 2, before anything is claimed."""
    from ..agents import approvals

    texts = [*setting.splitlines(), *(given or [])]
    return list(dict.fromkeys(r.text for r in approvals.parse_all(texts)))


def boundary_of(args: argparse.Namespace, res: Resources) -> Any:
    """The boundary of a loop's runs (``--sandbox``): the engine, checked
    before anything is claimed, and what no run may read or reach."""
    from .. import embedded, workspaces
    from ..agents import sandbox
    from ..db import addresses

    loop = res.settings.loop
    engine = sandbox.locate(loop.srt, os.environ)
    given = getattr(args, "allow_host", None) or []
    allow = [*filter(None, (h.strip() for h in loop.allow_hosts.split(","))), *given]
    for host in allow:
        reach.host_of(host)  # (BadInput for one that names no host)
    tcp, sockets = addresses(res.dsn)
    folders = [os.path.dirname(s) for s in sockets if s.startswith("/")]
    pghost = os.environ.get("PGHOST", "")
    folders += [h for h in pghost.split(",") if h.startswith("/")]
    server, homes = server_facts(res.dsn)
    hooks = hooklink.socket_path(os.environ)
    reads = getattr(args, "deny_read", None) or []
    denied = [
        str(embedded.home()),
        *reach.socket_paths([*folders, *(server or [])]),
        *([os.path.dirname(hooks)] if hooks else []),
        *(os.path.abspath(p) for p in reads),
    ]
    for given in (
        args.config,
        os.environ.get("AFK_CONFIG"),
        os.environ.get("CREDENTIALS_DIRECTORY"),
    ):
        if given:
            denied.append(os.path.abspath(given))
    service = res.settings.service
    return sandbox.Boundary(
        engine=engine,
        version=sandbox.version(engine),
        allow=tuple(allow),
        deny_read=tuple(dict.fromkeys(denied)),
        denied_hosts=tuple(tcp),
        hook_http=service.hook_http or None,
        worktrees=str(workspaces.worktrees_home()),
        server_sockets_known=server is not None,
        homes=tuple(homes),
    )


def server_facts(dsn: str) -> tuple[list[str] | None, list[str]]:
    """What the boundary asks the database: the folders of the server's own
    sockets (None when it could not be asked, or the role may not read them),
    and every profile's harness state folder (none but a run's own is read)."""
    from ..agents.profiles import Profiles
    from ..db import Database, socket_folders

    try:
        db = Database(dsn, pool_size=None, connect_timeout=5, retry_for=0)
        try:
            sockets = socket_folders(db)
            homes = [
                os.path.abspath(os.path.expanduser(p.env[h.home_variable]))
                for p in Profiles(db).all()
                for h in harnesses.HARNESS_TABLE
                if h.home_variable and p.env.get(h.home_variable)
            ]
            return sockets, homes
        finally:
            db.close()
    except AfkError:
        return None, []


def account_alert(db: Any, settings: Any) -> Any:
    """Sends a parking that needs a person through the alert destinations."""
    if not settings.digest.destinations():
        return None

    def send(parking: Any) -> None:
        from ..delivery import alert_account

        alert_account(db, settings.digest, parking)

    return send


def _detach() -> bool:
    """Fork: True in the parent, which exits at once; False in the child,
    which goes on in a session of its own with no terminal and no pipes. For a
    hook whose output is ignored and which the agent does not wait for:
    Claude Code (2.1.332, ``-p``) ends a StopFailure hook with SIGTERM as it
    exits, within milliseconds."""
    if os.fork():
        return True
    os.setsid()

    signal.alarm(hooklink.HOOK_DEADLINE)  # (an alarm is not inherited across a fork)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    return False
