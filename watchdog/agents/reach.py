"""The one room that owns a run's boundary: everything an agent's run can
reach, as data. Every door reads it, and no door keeps a list of its own:

- :data:`COMMANDS`: each command of the CLI, and what an agent may do with
  it. The run's broker answers only the commands an agent may run
  (:data:`AGENT_COMMANDS`), parsed by a parser built from this table (no
  abbreviation, no global option), on the run's own task; the zombie guard
  (:mod:`watchdog.agents.zombie`) reads what a session whose task is lost may
  still run; a command that runs a program runs it on the agent's side,
  inside the boundary (``afk once``).
- The paths: what no run reads under the home (:data:`DENIED_HOME`), the
  agent's own configuration in its worktree (:data:`PINNED`), the database
  sockets' usual folders (:data:`SOCKET_FOLDERS`).
- :func:`of_run`: a run's whole reach (what it writes, reads and never
  reads, the hosts it reaches), derived from its harness's record
  (:mod:`watchdog.agents.harnesses`) and the loop's boundary. The sandbox
  (:mod:`watchdog.agents.sandbox`) writes it in the engine's words; the docs'
  table (``docs/generate.py``) is written from it.

It imports nothing of afk's but the harness records: the zombie guard runs
on a hook's path.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..errors import BadInput
from .harnesses import HARNESS_TABLE, Harness

# -- the commands ----------------------------------------------------------------


@dataclass(frozen=True)
class ZombieRule:
    """What a session whose task is lost may still run of one command."""

    #: the options it may give (``None``: any, for a command that only reads)
    options: frozenset[str] | None = None
    #: the positional words it may give, in order (``None``: any)
    positionals: tuple[frozenset[str] | None, ...] | None = None
    #: a finishing command of its own task: no other task's id, no other token
    own_task: bool = False


@dataclass(frozen=True)
class Command:
    """One command of the CLI, as the boundary sees it."""

    #: who runs it, in a word (the docs' table): "agent" (through its run's
    #: broker, on its own task), "person", "operator" or "harness"
    who: str
    #: what a zombie may still run of it (None: nothing)
    zombie: ZombieRule | None = None
    #: it runs a program of the caller's: inside a run, on the agent's side of
    #: the boundary, never in afk's process
    runs_program: bool = False
    #: what it reaches, as the docs' table says it
    reaches: str = ""

    @property
    def agent(self) -> bool:
        """An agent may run it inside a run (through its broker)."""
        return self.who == "agent"


def _own(*options: str, question: bool = False) -> ZombieRule:
    """A finishing command of the session's own task: the fence refuses it
    under a stale token anyway, and it can name no other task or token."""
    words: tuple[frozenset[str] | None, ...] = ((None,) if question else ()) + (None,)
    return ZombieRule(frozenset({"--token", *options}), words, own_task=True)


_READS = ZombieRule()
#: the global options of the person's CLI (never an agent's: its parser has none)
GLOBAL_OPTIONS = ("--dsn", "--config")
_G = GLOBAL_OPTIONS
OWN = "its own task only"

#: every command of the CLI: a unit test keeps it and the CLI's in step, and
#: a command missing here is nobody's (the broker refuses it, a zombie may not
#: run it)
COMMANDS: dict[str, Command] = {
    # an agent's, on its own task, through its run's broker
    "done": Command("agent", _own("--result", "--next"), reaches=f"{OWN}: its claim of done"),
    "fail": Command("agent", _own("--error", "--next"), reaches=f"{OWN}: a failure"),
    "checkpoint": Command("agent", _own("--patch"), reaches=f"{OWN}: its checkpoint"),
    "heartbeat": Command("agent", _own(), reaches=f"{OWN}: its lease"),
    "ask": Command("agent", _own(question=True), reaches=f"{OWN}: a question for a person"),
    "pause": Command("agent", _own(), reaches=f"{OWN} (not --agent or --runner)"),
    "once": Command(
        "agent",
        None,  # (it runs a program: never a zombie's)
        runs_program=True,
        reaches=f"{OWN}: the effect's record; its command runs inside the boundary",
    ),
    "status": Command("agent", _READS, reaches="its own agent's counts"),
    "show": Command("agent", _READS, reaches=OWN),
    "resume-brief": Command("agent", _READS, reaches=OWN),
    # what the agent's harness runs: answered by the run's broker, for the run's
    # own task whatever the request names
    "hook": Command("harness", None, runs_program=True, reaches="the run's own task"),
    # a person's or an operator's: never an agent's
    "dead": Command("person", _READS),
    "questions": Command("person", _READS),
    "review": Command("person", _READS),
    "loops": Command("person", _READS),
    # (not --live: it runs the project's hook commands; not --sandbox)
    "doctor": Command("operator", ZombieRule(frozenset({"--json", "--project", *_G}), ())),
    "limit": Command("operator", ZombieRule(frozenset({"--account", *_G}), ())),  # the list
    "hooks": Command("operator", ZombieRule(frozenset({"--gate", *_G}), (None,))),  # printed
    "db": Command("operator", ZombieRule(frozenset(_G), (frozenset({"status"}),))),
    "digest": Command("operator", ZombieRule(frozenset({"--dry-run", "--format", *_G}), ())),
    "migrate": Command("operator"),
    "enqueue": Command("person"),
    "claim": Command("operator"),  # (claims another task)
    "loop": Command("operator", runs_program=True),
    "retry": Command("person"),
    "answer": Command("person"),
    "approve": Command("person"),  # a person's decision, never the agent's
    "deny": Command("person"),
    "approvals": Command("person"),  # (every task's calls)
    "web": Command("person"),  # makes a person's login
    "profile": Command("person"),  # the ways to run an agent
    "trust": Command("person"),  # lets a worktree's changed config run
    "cancel": Command("person"),  # ends other tasks
    "reclaim": Command("operator"),
    "demo": Command("person", runs_program=True),
    "watchdog": Command("operator", runs_program=True),
    "gc": Command("person"),  # removes worktrees
    "restore": Command("person"),
    "import": Command("person"),  # enqueues
    "export": Command("person"),  # writes a file
}
#: what an agent's ``afk`` may run inside a run, on its own task
AGENT_COMMANDS = tuple(name for name, c in COMMANDS.items() if c.agent)
#: the options of an agent's commands that reach past its own task: refused
#: whatever their value (its own agent's ``--agent`` aside)
REACHING_OPTIONS = {
    "next": "--next would claim another task: the loop gives the next one",
    "runner": "--runner is not for an agent: it acts on its own task only",
}


def not_an_agents(word: str | None) -> str:
    """The line that refuses a command no agent runs."""
    return (
        f"afk {word or '(no command)'} is not for an agent: inside a run, afk takes only "
        f"its own task's commands ({', '.join(AGENT_COMMANDS)})"
    )


# -- the paths -------------------------------------------------------------------

#: under the home: never readable inside
DENIED_HOME = (
    ".ssh",
    ".aws",
    ".config/gh",
    ".netrc",
    ".docker",
    ".gnupg",
    ".kube",
    ".pgpass",
    ".pg_service.conf",
    ".config/gcloud",
    ".config/afk",
)
#: the agent's own configuration in its worktree: read-only inside (what a
#: branch changes there would otherwise run on the host at the next run)
PINNED = (".claude", ".mcp.json", ".codex", ".gemini", ".cursor", ".github/hooks")
#: what the engine (srt) protects in the folder a run works in, and mounts a
#: placeholder for where it is absent (a /dev/null file, an empty folder):
#: its DANGEROUS_FILES and dangerous directories (srt 0.0.78
#: sandbox-utils.js), and afk's own read-only paths (:data:`PINNED`). Git
#: is told to ignore them in a task's own git folder (issue 50 item 1: they
#: showed in `git status` and `git add -A` failed on them).
ENGINE_FILES = (".gitconfig", ".gitmodules", ".bashrc", ".bash_profile", ".zshrc",
                ".zprofile", ".profile", ".ripgreprc", ".mcp.json")  # fmt: skip
ENGINE_FOLDERS = (".vscode", ".idea", ".claude/commands", ".claude/agents")
PLACEHOLDERS = tuple(dict.fromkeys([*ENGINE_FILES, *ENGINE_FOLDERS, *PINNED]))
#: in the repository's git folder a worktree commits into: read-only (what
#: runs at the person's git, what sends afk's git elsewhere)
GIT_READ_ONLY = ("config", "hooks", "info", "modules")
#: in the worktree's own git folder (``worktrees/NAME``): read-only
WORKTREE_READ_ONLY = ("commondir", "gitdir", "config.worktree")
#: where PostgreSQL's Unix sockets usually are (Debian's, and libpq's default
#: ``/tmp/.s.PGSQL.*``): never reachable inside, whatever the DSN says
SOCKET_FOLDERS = ("/var/run/postgresql", "/run/postgresql")
SOCKET_FILES = "/tmp/.s.PGSQL.*"


def socket_paths(folders: Sequence[str]) -> list[str]:
    """What hides the database's sockets from a run: ``folders`` (the DSN's,
    ``PGHOST``'s, the server's own), the usual folders, and each of libpq's
    default socket files (and their lock files) in ``/tmp``."""
    found = sorted(glob.glob(SOCKET_FILES))
    return list(dict.fromkeys([*folders, *SOCKET_FOLDERS, *found]))


# -- the hosts -------------------------------------------------------------------


def host_of(value: str) -> str:
    """``HOST[:PORT]`` of a URL or of a ``HOST[:PORT]`` as given."""
    parts = urlsplit(value if "//" in value else f"//{value}")
    if not parts.hostname:
        raise BadInput(f"{value!r} names no host")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{host}:{parts.port}" if parts.port else host


def allowed_hosts(
    harness: Harness | None,
    env: Mapping[str, str],
    extra: Sequence[str],
    hook_http: str | None,
) -> list[str]:
    """The hosts a run may reach: its harness's model API (or the host its
    variable names instead), the service's HTTP hooks, and ``extra``."""
    out: list[str] = []
    if harness is not None:
        default, variable = harness.api
        moved = env.get(variable, "").strip() if variable else ""
        out.append(host_of(moved) if moved else default)
    if hook_http:
        out.append(host_of(hook_http))
    out.extend(host_of(h) for h in extra)
    return list(dict.fromkeys(out))


def home_paths(home: str, harness: Harness | None) -> tuple[list[str], list[str]]:
    """Under ``home``: what is denied to every run, and what the harness writes."""
    denied = [os.path.join(home, p) for p in DENIED_HOME]
    state = [os.path.join(home, p) for p in harness.state] if harness is not None else []
    return denied, state


def harness_home(harness: Harness | None, env: Mapping[str, str]) -> str | None:
    """The state folder a run of ``harness`` has of its own (its variable,
    ``CLAUDE_CONFIG_DIR`` say, in the run's environment); None for a harness
    whose state cannot be moved."""
    if harness is None or harness.home_variable is None:
        return None
    given = env.get(harness.home_variable, "").strip()
    return os.path.abspath(os.path.expanduser(given)) if given else None


#: under afk's home: each profile's state folder of each harness whose state
#: moves (``homes/PROFILE/HARNESS``), for its sandboxed runs
HOMES = "homes"
#: the profile of a loop given ``-- CMD``
DEFAULT_PROFILE = "default"


# -- a run's reach ---------------------------------------------------------------


@dataclass(frozen=True)
class Reach:
    """Everything one run can reach: the sandbox writes it in its engine's
    words. Paths not named are read-only."""

    #: where it writes
    writable: tuple[str, ...]
    #: inside what it writes, what stays read-only
    read_only: tuple[str, ...]
    #: never read (nor connected to: a socket whose path it cannot see)
    denied: tuple[str, ...]
    #: inside what is denied, what it reads all the same (its own folders)
    readable: tuple[str, ...]
    #: the hosts it reaches, and those it never does whatever is allowed
    hosts: tuple[str, ...]
    denied_hosts: tuple[str, ...]


def of_run(
    harness: Harness | None,
    env: Mapping[str, str],
    *,
    work: str,
    tmp: str,
    own: Sequence[str],
    git_dir: str | None,
    denied: Sequence[str],
    allow: Sequence[str],
    hook_http: str | None,
    denied_hosts: Sequence[str],
    homes: Sequence[str] = (),
) -> Reach:
    """The reach of one run of ``harness`` working in ``work`` (its worktree,
    or its folder), with ``tmp`` its temporary folder: ``own`` what else of its
    own it reads where what is denied hides it (its broker's folder; not a
    folder that holds one it writes: the engine would mount it read-only over
    the other), ``git_dir`` the
    repository's git folder its worktree commits into, ``denied`` what the
    loop hides (afk's home, the database's sockets, every run's folders,
    --deny-read), ``allow`` the hosts the person allowed, ``homes`` every
    profile's harness state folder (none but the run's own is read)."""
    home = env.get("HOME") or os.path.expanduser("~")
    never, state = home_paths(home, harness)
    own_home = harness_home(harness, env)
    # every other harness's state (its logins, its sessions) and every other
    # profile's folder are never read
    never += [os.path.join(home, s) for h in HARNESS_TABLE if h is not harness for s in h.state]
    never += [h for h in homes if h != own_home]
    if own_home is not None:  # its own folder; the person's own is never read
        never += state
        state, own = [own_home], [*own, own_home]
    writable = [work, tmp, *state]
    read_only = [os.path.join(work, p) for p in PINNED]
    if git_dir is not None:  # (its commits go there; its config and hooks stay)
        writable.append(git_dir)
        admin = os.path.join(git_dir, "worktrees", os.path.basename(work))
        kept = [
            *(os.path.join(git_dir, name) for name in GIT_READ_ONLY),
            *(os.path.join(admin, name) for name in WORKTREE_READ_ONLY),
        ]
        read_only += [p for p in kept if os.path.lexists(p)]  # (the engine would make the rest)
    return Reach(
        writable=tuple(writable),
        read_only=tuple(read_only),
        denied=tuple(dict.fromkeys([*never, *denied])),
        readable=tuple(dict.fromkeys([work, tmp, *own])),
        hosts=tuple(allowed_hosts(harness, env, allow, hook_http)),
        denied_hosts=tuple(denied_hosts),
    )


# -- the runs' own folders -------------------------------------------------------


def runs_root() -> str:
    """The folder (mode 0700) of every run's folder and every broker's
    socket of this user: hidden from each run but for its own two. Under a
    short path (a Unix socket's may not be longer than 107 bytes), never
    under /dev (the sandbox gives a run a /dev of its own)."""
    import tempfile

    base = tempfile.gettempdir()
    usable = len(base) <= 40 and not base.startswith("/dev/")
    root = os.path.join(base if usable else "/tmp", f"afk-{os.getuid()}")
    try:
        os.mkdir(root, 0o700)
    except FileExistsError:
        st = os.lstat(root)
        if st.st_uid != os.getuid() or not os.path.isdir(root) or os.path.islink(root):
            raise BadInput(
                f"{root} is not a folder of this user's: remove it, or set TMPDIR"
            ) from None
        if st.st_mode & 0o077:
            os.chmod(root, 0o700)
    return root


def run_folder(prefix: str = "afk-run-") -> str:
    """A private folder (mode 0700) for one run's settings and temporary
    folder, or a broker's socket, in :func:`runs_root`."""
    import tempfile

    return tempfile.mkdtemp(prefix=prefix, dir=runs_root())
