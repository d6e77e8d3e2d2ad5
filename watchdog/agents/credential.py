"""What afk gives an agent's environment, in one table (:data:`GIVEN`), and
the task credential within it: which task it works on and the lease token
that fences its writes. ``afk loop`` writes it into the environment of the
agent it runs (with what is left of the task's budget), and the SessionStart
hook into a session's later shells; every ``afk`` command an agent runs and
every hook read it from there. Its names are written here once (``config``
lists them as afk's own variables).

Nothing else of afk's reaches an agent (:func:`for_agent`): no DSN, no
password, no libpq variable, no settings file or folder that holds one. The
agent's ``afk`` commands reach the queue through its run's broker
(:mod:`watchdog.agents.broker`), which takes the task token as the only
credential."""

from __future__ import annotations

from collections.abc import Mapping

TASK_ID = "AFK_TASK_ID"
TASK_TOKEN = "AFK_TASK_TOKEN"
#: the same token under a name no harness redacts (Gemini CLI drops
#: variables whose names say TOKEN from its hooks' environment)
TASK_LEASE = "AFK_TASK_LEASE"
#: what is left of the task's budget, in US dollars (afk loop only)
TASK_BUDGET = "AFK_TASK_BUDGET_USD"
#: the runner id of the process that holds the lease
RUNNER = "AFK_RUNNER_ID"

#: every name of the credential, the runner's with it
NAMES = (TASK_ID, TASK_TOKEN, TASK_LEASE, TASK_BUDGET, RUNNER)
#: an HTTP hook's bearer credential: inside a run, the run's own (signed for
#: its task, token and account); a person's token never reaches a run
HOOK_TOKEN = "AFK_HOOK_TOKEN"
#: the socket of the run's broker: the agent's afk commands go there
BROKER = "AFK_BROKER"
#: the same, in the environment of a command the broker runs for the agent
#: (never the agent's own): `afk once` gives its command the agent's
#: environment, this broker and no DSN, not the loop's
BROKERED = "AFK_BROKERED"

#: every variable of afk's an agent is given, and why; nothing else that
#: starts with AFK_ or PG reaches it (:func:`for_agent`)
GIVEN: dict[str, str] = {
    TASK_ID: "the task the run works on",
    TASK_TOKEN: "the run's lease token: its only credential, which fences its writes",
    TASK_LEASE: "the same token under a name no harness redacts (Gemini CLI's hooks)",
    TASK_BUDGET: "what is left of the task's budget, for the agent's own cap",
    "AFK_AGENT_ID": "the agent the task belongs to",
    "AFK_ACCOUNT": "the account the run is under (its usage limits)",
    BROKER: "the run's broker: the agent's afk commands reach the queue through it",
    "AFK_HOOK_SOCKET": "where command hooks are answered: the run's broker",
    HOOK_TOKEN: "the run's own credential for Claude Code's HTTP hooks (signed for its task, "
    "token and account: the service acts for that task whatever the headers say)",
    "AFK_ALIVE_FILE": "the file a hook touches as the run's sign of life",
    "AFK_WORKTREE": "the task's worktree",
    "AFK_BRANCH": "the task's branch",
    "AFK_BASE_SHA": "the commit the task's branch started from",
    "AFK_PORT": "the first of the task's ports",
    "AFK_PORTS_PER_TASK": "how many ports the task holds from AFK_PORT on",
    "AFK_EFFECT_KEY": "an afk once command's idempotency key",
    "AFK_RUN_APPROVALS": "the calls a person must approve (--ask-for), how long a request "
    "waits and what it then becomes: its hooks defer those calls",
}
#: never given to an agent, whatever the loop's own environment holds: every
#: other afk setting and libpq's variables (by prefix), a URL of a database,
#: systemd's credentials folder (the service's secrets)
WITHHELD_PREFIXES = ("AFK_", "PG")
WITHHELD = ("DATABASE_URL", "CREDENTIALS_DIRECTORY")


def for_agent(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` as an agent may see it: what :data:`GIVEN` names of afk's, and
    everything that is not afk's, libpq's or a database's."""
    return {
        k: v
        for k, v in env.items()
        if k in GIVEN or not (k.startswith(WITHHELD_PREFIXES) or k in WITHHELD)
    }


def written(task_id: object, token: int, budget_left: float | None = None) -> dict[str, str]:
    """The credential of a task as environment variables."""
    env = {TASK_ID: str(task_id), TASK_TOKEN: str(token), TASK_LEASE: str(token)}
    if budget_left is not None:
        env.update(budget(budget_left))
    return env


def budget(left: float) -> dict[str, str]:
    """What is left of a task's budget, in dollars, never below zero."""
    return {TASK_BUDGET: f"{max(left, 0):.2f}"}


def read(env: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The task id and the token an environment gives (either may be None)."""
    return env.get(TASK_ID) or None, env.get(TASK_TOKEN) or env.get(TASK_LEASE) or None


def for_brokered(env: Mapping[str, str]) -> dict[str, str]:
    """What a command that ``afk once`` runs for an agent through its broker
    gets: the agent's environment, its afk reaching the same broker; ``env``
    itself outside a run."""
    broker = env.get(BROKERED)
    if not broker:
        return dict(env)
    return {**for_agent(env), BROKER: broker, "AFK_HOOK_SOCKET": broker}
