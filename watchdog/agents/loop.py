"""``afk loop``: the supervisor that drains an agent's backlog all night.

Per task: claim (under an account), run ``CMD ARG... PROMPT`` with the task
in its environment and its output passed through, keep the lease alive while
it runs, read how it ended (``outcome.py``), settle the task accordingly,
next. What each outcome does:

- done: finished. task_failure: failed with the agent's telling lines (an
  attempt spent, retried after the queue's backoff).
- usage_limit: the task paused, the account parked until the reset the agent
  named (else for ``AFK_LIMIT_PROBE_SECONDS``); every loop on that account
  waits for it. No attempt spent.
- outage: the task back to todo, due after a doubling backoff; that many in a
  row (``AFK_OUTAGE_BREAKER``) park the account for the backoff too. No
  attempt spent.
- needs_human: the task paused, the account parked with no end, an alert
  sent, and the loop exits 5 with one line. No attempt spent.
- interrupted (the agent exited 130/143): paused, and the loop exits so.

SIGINT/SIGTERM stop the agent (its process group: SIGTERM, then SIGKILL
after ``AFK_AGENT_GRACE_SECONDS``), pause its task and exit 130/143, also
while the loop sleeps. The loop waits for tasks in a retry's backoff and for
its account's reset, and ends (exit 0) when nothing is left that it can do;
``--wait`` keeps it looking for new tasks.

No transaction is open while the agent runs: each step is one statement.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo
from pathlib import Path
from typing import IO, Any, Literal, Protocol

from .. import git, tracing, workspaces
from ..config import DEFAULT_APPROVAL_TTL, LoopSettings
from ..embedded import private, profile_home
from ..errors import (
    EXIT_OK,
    EXIT_PARKED,
    EXIT_USAGE,
    AccountParked,
    DatabaseError,
    LeaseLost,
    WorkspaceError,
)
from ..ids import short_id
from ..links import sign_run
from ..models import Claimed, Task
from ..queue import Queue
from ..text import clean, one_line
from ..workspaces import Workspace
from . import approvals, credential, reach, sandbox
from .accounts import DEFAULT_ACCOUNT, Accounts, Parking
from .brief import fit_prompt, resume_argv, resume_brief
from .decide import Decision, Move, RunEnd, decide, probe_after, rules_of
from .fleet import Membership
from .harnesses import (
    Harness,
    give_home_hooks,
    harness_label,
    harness_of,
    isolated,
    prompt_argv,
    with_hooks,
)
from .outcome import (
    Outcome,
    Report,
    Settled,
    Verdict,
    classify,
    compile_patterns,
    describe_tool,
)
from .process import Limits, Signs, run_agent, run_check, sweep_orphans
from .profiles import Profile, Route, offered
from .sandbox import Boundary
from .words import due_words, failed_line, held_words, task_name, words

#: the longest a loop sleeps between two looks at the database while it waits
#: for a reset or a backoff (a parking cleared by hand is seen this soon)
MAX_NAP = 60.0


class Serving(Protocol):
    """The run's broker (:class:`watchdog.agents.broker.Broker`), as the loop
    sees it: which run it answers for, and what the agent is given to reach it."""

    def serving(self, task: Task | None, account: str | None = None) -> None: ...

    def refused(self) -> list[str]: ...

    def given(self) -> dict[str, str]: ...


#: how often a loop that stays for a person's decision looks for it
APPROVAL_POLL_SECONDS = 2.0


@dataclass
class LoopOptions:
    agent: str
    command: list[str]
    account: str = DEFAULT_ACCOUNT
    lease: float | None = None
    wait: bool = False
    max_tasks: int | None = None
    runner: str | None = None
    #: variables the agent gets besides the task's (a profile's)
    env: dict[str, str] = field(default_factory=dict)
    #: the service's secret of hooks, when it answers HTTP hooks: each run's
    #: HTTP hooks get a credential of their own, signed with it
    #: (:func:`watchdog.links.sign_run`), never a person's AFK_HOOK_TOKEN
    hook_secret: str | None = None
    #: the zone of a day, for the daily budget (an IANA name)
    day_zone: str = "UTC"
    #: --stall-after and --max-run, seconds (None: the settings')
    stall_after: float | None = None
    max_run: float | None = None
    #: --repo: the workspace request given to a task that asked for none
    workspace: dict[str, Any] | None = None
    #: --verify and --require-changes: the default of the loop's tasks
    verify: str | None = None
    require_changes: bool = False
    #: --sandbox: the boundary every run (and its check) is held to
    boundary: Boundary | None = None
    #: --ask-for: the calls a person must approve (issue 43), and
    #: --approval-ttl / --on-approval-timeout: how long a request waits, and then
    ask_for: list[str] = field(default_factory=list)
    approval_ttl: float = DEFAULT_APPROVAL_TTL
    on_approval_timeout: str = "deny"
    #: --profile, in order (issue 44): each run goes to the first whose
    #: account is not parked (none: the one command and account above)
    profiles: list[Profile] = field(default_factory=list)
    #: --label: what this loop's machine offers (a task's --requires)
    labels: list[str] = field(default_factory=list)
    #: --switch-after: how long a task waits for the parked profile of the
    #: session it resumes before it moves to another, fresh (seconds)
    switch_after: float = 15 * 60.0


def default_runner() -> str:
    return f"{socket.gethostname()}-loop-{os.getpid()}"


class Loop:
    """One supervisor. ``run()`` returns the exit status."""

    def __init__(
        self,
        queue: Queue,
        accounts: Accounts,
        settings: LoopSettings,
        options: LoopOptions,
        *,
        tz: tzinfo,
        scrub: Callable[[str], str] = lambda text: text,
        alert: Callable[[Parking], None] | None = None,
        out: IO[str] | None = None,
        start: Callable[..., Report] = run_agent,
        broker: Serving | None = None,
    ) -> None:
        """``start`` runs the agent (:func:`watchdog.agents.process.run_agent`: a
        process group of its own); a test gives a stand-in that returns the
        run's :class:`Report`, to settle real tasks in-process."""
        self.q, self.accounts, self.settings, self.o = queue, accounts, settings, options
        #: the profile of the run under way (--profile), and the environment
        #: the loop gives every profile's runs
        self.profile: Profile | None = None
        #: its way through --profile (the profiles usable now, parked ones)
        self.route = Route(queue.db, options.profiles, options.switch_after)
        #: the run under way starts a fresh session (its task moved profile)
        self.fresh = False
        #: the decided approval whose session a task's run resumes, by task
        self.decided: dict[uuid.UUID, dict[str, Any] | None] = {}
        self.base_env = dict(options.env)
        #: its place in the fleet while it runs
        self.member: Membership | None = None
        self.start = start
        self.broker = broker
        #: this process is its agents' subreaper (`afk loop`'s own process,
        #: never a test's): what a run left outside its group is stopped after it
        self.subreaper = False
        self.tz, self.scrub, self.alert = tz, scrub, alert
        self.out = out or sys.stderr
        self.runner = options.runner or default_runner()
        self.patterns = compile_patterns(settings.limit_patterns)
        self.stopped = threading.Event()
        self.stop_status = 0
        self.outages = 0
        #: usage limits in a row that named no reset (each guess waits longer)
        self.guessed = 0
        self.runs = 0
        self._said: str | None = None
        #: tasks whose last run a signal the loop did not send stopped: the
        #: next such stop in a row spends an attempt (the OOM killer's, say)
        self.stopped_outside: dict[uuid.UUID, bool] = {}

    # -- signals ------------------------------------------------------------

    def request_stop(self, signum: int, _frame: object = None) -> None:
        """SIGINT/SIGTERM: stop the agent, then the loop (128 + signum)."""
        if not self.stop_status:
            self.stop_status = 128 + signum
        self.stopped.set()

    def say(self, line: str, *, once: bool = False) -> None:
        if once and line == self._said:
            return
        self._said = line
        print(f"afk loop: {line}", file=self.out, flush=True)

    # -- the loop -------------------------------------------------------------

    def run(self) -> int:
        """Run until nothing is left (or a stop), registered in the fleet
        meanwhile (afk loops)."""
        self.member = Membership(
            self.q.db,
            self.runner,
            self.o.agent,
            [*self.o.labels, *self.offered(self.o.profiles)],
            [p.name for p in self.o.profiles],
            self.settings.fleet_lost_seconds,
        )
        try:
            return self._run()
        finally:
            self.member.leave()
            self.member = None

    def _run(self) -> int:
        reached = False
        failures = 0
        while not self.stopped.is_set():
            if self.o.max_tasks is not None and self.runs >= self.o.max_tasks:
                self.say(f"ran {self.runs} task(s), as --max-tasks asked")
                return EXIT_OK
            if self.o.profiles:
                try:
                    waited = self.choose_profile()
                except DatabaseError as exc:
                    failures += 1
                    self.say(f"the database did not answer ({exc}); trying again", once=True)
                    self.stopped.wait(min(2.0**failures, 30.0))
                    continue
                if waited is not None:
                    return waited
                if self.profile is None:
                    continue  # (every profile parked: it waited; look again)
            try:
                self.check_daily_budget()
                claimed = self.q.take(
                    self.o.agent,
                    runner=self.runner,
                    lease_seconds=self.o.lease,
                    account=self.o.account,
                    labels=[*self.o.labels, *self.offered(self.route.usable)],
                    profiles=[p.name for p in self.route.usable] if self.o.profiles else None,
                )
            except AccountParked as parked:
                if self.o.profiles:
                    continue  # (parked since it was chosen: the next profile's turn)
                if parked.limited_until is None:
                    self.say(
                        f"account {parked.account!r} is parked until a person clears it "
                        f"(afk limit --account {parked.account} --clear): {parked.reason}"
                    )
                    return EXIT_PARKED
                self.say(
                    f"account {parked.account!r} is parked until "
                    f"{self._local(parked.limited_until)}: {parked.reason}; waiting",
                    once=True,
                )
                self._nap_until(parked.limited_until)
                continue
            except DatabaseError as exc:
                if not reached:
                    raise  # a wrong DSN fails at once, not after a night of retries
                failures += 1
                self.say(f"the database did not answer ({exc}); trying again", once=True)
                self.stopped.wait(min(2.0**failures, 30.0))
                continue
            reached, failures = True, 0
            if claimed.task is None:
                if self.waited_for_work(claimed):
                    continue
                self.say(f"nothing left for agent {self.o.agent!r}")
                return EXIT_OK
            if self.stopped.is_set():  # claimed, but asked to stop: give it back
                self.q.release(claimed.task, "paused: the supervisor was stopped")
                break
            if self.o.profiles and not self.place_task(claimed.task, claimed.db_now):
                continue  # (given back: it waits for its session's profile)
            if self.member is not None:
                self.member.now(claimed.task.id, self.profile.name if self.profile else None)
            try:
                status = self.work(claimed.task)
            except DatabaseError as exc:
                # the run is over; its task could not be settled: its lease runs
                # out and the watchdog gives it back (a crash, not a loss)
                self.say(f"task {claimed.task.id} was not settled ({exc}); going on")
                self.stopped.wait(2.0)
                continue
            finally:
                self.fresh = False
                self.decided.pop(claimed.task.id, None)
                if self.member is not None:
                    self.member.now(None, None)
            if status is not None:
                return status
        return self.stop_status or EXIT_OK

    def waited_for_work(self, claimed: Claimed) -> bool:
        """Nothing was claimed: wait for what the agent has coming (a lease
        run out, taken back here as the watchdog would; a backoff or a start
        time; a held task; --wait), True; False when nothing is left."""
        held, now = claimed.held_until, claimed.db_now
        if held is not None and held <= now:
            reclaimed = self.q.reclaim()
            if reclaimed.total:
                self.say(f"took back {reclaimed.total} task(s) whose lease ran out")
            self.stopped.wait(1.0)  # (a lease just renewed: look again soon)
        elif claimed.next_at is not None and (held is None or claimed.next_at <= held):
            due = self._local(claimed.next_at)
            self.say(f"{due_words(self.o.agent, due)}; waiting", once=True)
            self._nap(claimed.next_at, now)
        elif held is not None:
            self.say(
                f"{held_words(self.o.agent)}; waiting until it ends or the lease runs out",
                once=True,
            )
            # (a held task can end any moment: looked at as often as --wait looks)
            self._nap(min(held, now + timedelta(seconds=self.settings.loop_poll_seconds)), now)
        elif self.o.wait:
            self.say(f"nothing to do for {self.o.agent!r}; waiting for tasks", once=True)
            self.stopped.wait(self.settings.loop_poll_seconds)
        elif self.settings.stay_for_approvals and self.q.approvals_waiting_for(self.o.agent):
            # (issue 50 item 3: a decision makes its task due; the loop that
            # holds the session takes it within seconds, not a later loop)
            self.say(
                f"a task of {self.o.agent!r} waits for a person's approval (afk approvals); "
                "the loop stays for the decision",
                once=True,
            )
            self.stopped.wait(APPROVAL_POLL_SECONDS)
        else:
            return False
        return True

    def choose_profile(self) -> int | None:
        """The profile of the next run (issue 44): the first of --profile whose
        account is not parked. When every one is, the loop waits until the
        earliest end of their parkings (``self.profile`` None then), or stops
        (exit 5) when no parking ends by itself."""
        look = self.route.look({p.account: p.limited_until for p in self.accounts.parked()})
        if look.gone is not None:
            self.say(f"profile {look.gone!r} was removed (afk profile remove): the loop stops")
            return EXIT_USAGE
        if look.first is not None:
            if look.switched:
                first = look.first
                self.say(f"runs go to profile {first.name!r} (account {first.account!r}) now")
            self.use(look.first)
            return None
        self.profile = None
        if look.until is None:
            names = ", ".join(repr(p.name) for p in self.o.profiles)
            self.say(f"every profile ({names}) is parked until a person clears it: afk limit")
            return EXIT_PARKED
        waiting = f"waiting until {self._local(look.until)}, the earliest reset"
        self.say(f"every profile is parked; {waiting}", once=True)
        self._nap_until(look.until)
        return None

    def use(self, profile: Profile) -> None:
        """The next run goes to ``profile``: its command, environment, account."""
        self.profile = profile
        self.o.command, self.o.account = list(profile.command), profile.account
        self.o.env = {**self.base_env, **profile.env}

    def offered(self, profiles: list[Profile]) -> list[str]:
        """What the loop offers for its harnesses (harness:claude): its usable
        profiles', or its one command's."""
        if self.o.profiles:
            return offered(profiles)
        found = harness_of(self.o.command)
        return [harness_label(found.name)] if found is not None else []

    def place_task(self, task: Task, now: datetime) -> bool:
        """Run a claimed task under the profile :func:`place` chooses (the
        session it resumes keeps it on its profile, within --switch-after);
        False when it was given back to wait for that profile's reset."""
        decided = self.decided[task.id] = self.q.approval_to_resume(task)
        resumable = decided is not None and approvals.resumable(decided.get("session_id"))
        session = decided.get("profile") if decided is not None and resumable else None
        placed = self.route.place(task, session, now)
        if placed.profile is None:
            wait = 300.0 if placed.until is None else (placed.until - now).total_seconds()
            held = self.route.named(session)
            self.q.release(
                task,
                f"waits for its profile: {placed.why}",
                state="todo",
                retry_in=min(max(wait, 1.0), 7 * 86400.0),
                outcome=str(Outcome.USAGE_LIMIT),
                run={"profile": held.name, "account": held.account} if held else None,
            )
            self.say(f"task {task.id} {placed.why}; it waits, the others go on")
            del self.decided[task.id]
            return False
        if placed.why:
            self.say(f"task {task.id}: {placed.why}")
        self.fresh = placed.fresh
        self.use(placed.profile)
        return True

    def work(self, task: Task) -> int | None:
        """Run the agent on one task and settle it; an exit status ends the loop."""
        self.runs += 1
        self._said = None
        try:
            ws = self.workspace(task)
        except WorkspaceError as exc:
            return self.cannot_start(task, str(exc), given_back=True)
        if ws is None and (self.o.verify or self.o.require_changes):  # (P17: not in silence)
            self.say(
                f"task {task.id} has no workspace: the loop's --verify and "
                "--require-changes do not apply to it"
            )
        if ws is not None:
            changed = workspaces.pinned_changes(self.q.db, ws)
            if changed:
                workspaces.unlock(ws)
                self.hold_pinned(task, changed)
                return None
        first = task.attempts <= 1  # a retry is a trace of its own, linked
        tracing.keep_out(task.token)  # (R12: in no span, whatever carries it)
        try:
            with tracing.span(
                f"process {task.agent_id}",
                kind="consumer",
                parent=task.trace_parent if first else None,
                link=None if first else task.trace_parent,
                attributes={
                    **tracing.attempt_attributes(task.agent_id, task.id, task.attempts),
                    "afk.account": self.o.account,
                    "afk.runner": self.runner,
                },
            ) as attempt:
                return self._work(task, ws, tracing.trace_id(attempt))
        finally:
            if ws is not None:
                workspaces.unlock(ws)
            if self.subreaper:
                left = sweep_orphans(self.settings.agent_grace_seconds)
                if left:
                    self.say(
                        f"task {task.id}: stopped {len(left)} process(es) its run left "
                        "outside its group (setsid, nohup)"
                    )

    def _work(self, task: Task, ws: Workspace | None, trace_id: str | None) -> int | None:
        spent, budget = self.q.cost(task) if task.budget_usd is not None else (None, None)
        signs = Signs()
        before = git.head(ws.path) if ws is not None else None
        agent_span = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": task.agent_id}
        with tracing.span(f"invoke_agent {task.agent_id}", attributes=agent_span) as session:
            refused: list[str] = []
            with self.q.leased(task, sign=signs.last) as lease, self._serving(task, refused):
                prompt = self._prompt(task)
                report = self.run_agent(task, prompt, lease.lost, spent, budget, signs, ws, session)
                now = self.accounts.clock()
                stopped = self.stopped.is_set()
                verdict = classify(report, now, self.tz, self.patterns, interrupted=stopped)
                if not lease.lost.is_set() and not stopped:
                    verdict = self.calls_outstanding(task, report, verdict)
                if (
                    ws is not None
                    and not lease.lost.is_set()
                    and verdict.outcome is not Outcome.NEEDS_APPROVAL
                ):
                    # (under the lease: a check longer than it keeps the task)
                    verdict = self.check_work(task, ws, report, verdict, before, lease.lost)
            report.extra["trace_id"] = trace_id
            if refused:  # (what its broker refused it: another task, another command)
                report.extra["refused"] = refused
            tracing.set_attributes(session, {"gen_ai.conversation.id": report.session_id})
            if lease.lost.is_set() and not self.stopped.is_set():
                # the run still ends, with what it cost: budgets count it
                tracing.error(session, str(Settled.LEASE_LOST))
                self.q.record_lost_run(task, report.to_run(Settled.LEASE_LOST, self.scrub))
                self.say(
                    f"task {task.id}: {lease.error or 'the lease was lost'}; the agent was "
                    "stopped and the task left to its new holder"
                )
                return None
            if report.cost_refused is not None:
                self.say(f"warning: task {task.id}: {report.cost_refused}")
            if verdict.outcome is not Outcome.DONE:
                tracing.error(session, str(verdict.outcome))
        total = (spent or 0) + (report.cost_usd or 0)
        over = (total, budget) if budget is not None and total >= budget else None
        outcome = {"afk.outcome": str(verdict.outcome)}
        with tracing.span(f"settle {task.agent_id}", attributes=outcome):
            return self.settle(task, report, verdict, now, over_budget=over)

    @contextlib.contextmanager
    def _serving(self, task: Task, refused: list[str]) -> Iterator[None]:
        """The broker answers for ``task`` while its run and check last; what
        it refused the run is put in ``refused``."""
        if self.broker is None:
            yield
            return
        self.broker.serving(task, self.o.account)
        try:
            yield
        finally:
            refused.extend(self.broker.refused())
            self.broker.serving(None)

    # -- the workspace -------------------------------------------------------------

    def workspace(self, task: Task) -> Workspace | None:
        """The task's worktree (made at its first claim; ``--repo`` gives one
        to a task that asked for none; one it cannot make: the task paused)."""
        return self.q.worktree(task, self.settings.ports_per_task, self.o.workspace)

    def cannot_start(self, task: Task, why: str, *, given_back: bool = False) -> int:
        """A run that cannot start for a reason of a person's (its repository
        is gone, its command cannot run): paused, no attempt spent, and the
        loop stops (exit 5) instead of failing the backlog. ``given_back``:
        paused already (the queue's worktree did it)."""
        line = self.scrub(why)
        if not given_back:
            self.q.release(task, f"paused: {line}", outcome=Outcome.CANNOT_START)
        self.say(
            f"{line}; task {task.id} paused with no attempt spent, and no other task "
            "started: fix it, then run afk loop again"
        )
        return EXIT_PARKED

    def check_work(
        self,
        task: Task,
        ws: Workspace,
        report: Report,
        verdict: Verdict,
        before: str | None,
        lost: threading.Event,
    ) -> Verdict:
        """What the run left in its worktree, recorded on the run; and before
        done, the check: a run that would end done is a task failure when
        it changed nothing and changes are required, or when its check fails."""
        gone = workspaces.emptied(ws.path)
        if gone is not None and verdict.outcome is Outcome.DONE:
            # (deleted or emptied under the run, R9: nothing of its work is there)
            line = f"the task's worktree {ws.path} was {gone} during the run"
            report.failure = line
            return Verdict(Outcome.TASK_FAILURE, line)
        after = git.head(ws.path)
        workspaces.record_head(self.q.db, ws, after)
        added = len(git.commits(ws.path, before, after)) if before and after else 0
        changes = added + (1 if git.dirty(ws.path) else 0)
        report.extra.update(before_sha=before, after_sha=after, changes=changes)
        if verdict.outcome is not Outcome.DONE:
            return verdict
        if changes == 0 and (ws.require_changes or self.o.require_changes):
            line = "no changes: the run left no new commit and a clean worktree"
            report.failure = f"{line} (--require-changes)"
            return Verdict(Outcome.TASK_FAILURE, line)
        command = ws.verify or self.o.verify
        if command is None:
            return verdict
        env = {**self.agent_env(task), **ws.env()}
        with self._inside(["sh", "-c", command], env, ws) as argv:
            status, said = self._check(argv, ws, env, lost)
        tail = clean(said)[-workspaces.CHECK_TAIL :]
        report.extra.update(check_status=status, check_tail=self.scrub(tail))
        if status == 0:
            return verdict
        line = f"the check failed: {workspaces.telling(tail)}"
        report.failure = f"{line}\n\n`{command}` exited {status}; it printed:\n{tail}"
        return Verdict(Outcome.TASK_FAILURE, line)

    def _check(
        self, argv: list[str], ws: Workspace, env: dict[str, str], lost: threading.Event
    ) -> tuple[int, str]:
        return run_check(
            argv,
            ws.path,
            env,
            timeout=self.settings.verify_timeout_seconds,
            lost=lost,
            grace=self.settings.agent_grace_seconds,
            keep=4 * workspaces.CHECK_TAIL,
        )

    def settle(
        self,
        task: Task,
        report: Report,
        verdict: Verdict,
        now: datetime,
        *,
        over_budget: tuple[float, float] | None = None,
    ) -> int | None:
        """Settle the task of a run that ended with ``verdict``, as
        :func:`~watchdog.agents.decide.decide` says; the loop's exit status when it
        must stop, else None."""
        kind = verdict.outcome
        self.outages = self.outages + 1 if kind is Outcome.OUTAGE else 0
        guessed = kind is Outcome.USAGE_LIMIT and (verdict.reset is None or verdict.reset <= now)
        self.guessed = self.guessed + 1 if guessed else 0
        if kind is not Outcome.INTERRUPTED:
            self.stopped_outside.pop(task.id, None)
        decision = decide(
            kind,
            rules_of(self.settings, self.q.settings.backoff_base_seconds),
            now,
            RunEnd(
                reset=verdict.reset,
                outages_in_a_row=self.outages,
                guessed_in_a_row=max(self.guessed, 1),
                over_budget=over_budget is not None,
                denied=bool(report.permission_denials),
                stopped_by_loop=self.stopped.is_set(),
                stopped_outside_before=bool(self.stopped_outside.get(task.id)),
                stalled_before=kind is Outcome.STALLED and self._stalled_before(task),
            ),
        )
        try:
            return self._apply(task, report, verdict, decision, over_budget)
        except LeaseLost as exc:
            # the agent settled it itself (afk fail, afk pause) or the lease ran out
            self.say(f"task {task.id} was not settled by the loop: {exc}")
        return None

    def _apply(
        self,
        task: Task,
        report: Report,
        verdict: Verdict,
        d: Decision,
        over_budget: tuple[float, float] | None,
    ) -> int | None:
        """Do what ``d`` says: park the account, move the task, say so."""
        kind, account = verdict.outcome, self.o.account
        run = report.to_run(kind, self.scrub)
        line = self.scrub(verdict.line)
        if d.probe and d.move is Move.PAUSE:
            rules = rules_of(self.settings, self.q.settings.backoff_base_seconds)
            after = probe_after(rules, max(self.guessed, 1))
            line += f" (no reset time read: a guessed reset, probed again after {after:g}s)"
        said = words(kind, d, report, verdict, line, task=task.id, account=account,
                     outages=self.outages, title=task.title, scrub=self.scrub)  # fmt: skip
        parking = None
        if d.park is not None:
            reason = f"provider outage: {line}" if d.park == "outage" else line
            parking = self.accounts.park(account, d.park, reason, d.park_until)
        if kind is Outcome.INTERRUPTED and not d.ends_loop:
            if d.move is Move.FAIL:
                self.stopped_outside.pop(task.id, None)
            else:
                self.stopped_outside[task.id] = True
        if d.move is Move.HOLD and over_budget is not None:
            self.hold_over_budget(task, run, over_budget, line)
        elif d.move is Move.APPROVAL:
            self.hold_for_approval(task, run, line)
        elif d.move is Move.ASK:
            self.ask_about_denials(task, report, run)
        elif d.move is Move.DONE:
            self.q.done(task, run=run)
        elif d.move is Move.FAIL:
            ended = self.q.fail(task, said.error, run=run)
            due = self._local(ended.run_after) if ended.run_after is not None else None
            self.say(failed_line(task_name(task.id, task.title), said.spent, state=ended.state,
                                 attempts=ended.attempts, max_attempts=ended.max_attempts,
                                 due=due))  # fmt: skip
        elif d.move in (Move.RETRY, Move.PAUSE):
            state: Literal["todo", "paused"] = "todo" if d.move is Move.RETRY else "paused"
            # (a stall is the run's own doing: what it printed is its error, R10)
            kept = said.why if kind is Outcome.STALLED else None
            self.q.release(task, said.why, state=state, retry_in=d.retry_in, outcome=kind,
                           run=run, error=kept)  # fmt: skip
        if said.line:
            self.say(said.line)
        if parking is not None and d.park == "needs_human":
            self._alert(parking)
        if d.ends_loop:
            if d.exit_status is not None:
                return d.exit_status
            return self.stop_status or report.exit_status or 130
        return None

    def _stalled_before(self, task: Task) -> bool:
        """Whether the task's last ended run stalled too."""
        ended = [r for r in self.q.runs(task) if r["ended_at"] is not None]
        return bool(ended) and ended[-1]["outcome"] == Outcome.STALLED

    def hold_pinned(self, task: Task, changed: list[str]) -> None:
        """A worktree whose branch (or whose repository's git folder) changed
        the agent's own configuration does not run: what it would run with
        (a hook, an MCP server, a git hook) runs outside any boundary. Held
        for a person, no attempt spent; `afk trust ID` lets that content run."""
        names = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if changed[5:] else "")
        question = (
            f"the branch changed {names}: what it would run is not run until a person "
            f"reads it (git diff in the worktree) and says `afk trust {task.id}`"
        )
        self.q.ask(task, one_line(question, 1000), token=task.token, run={"outcome": "needs_input"})
        self.say(f"{task_name(task.id, task.title)}: held, needs input: {one_line(question, 300)}")

    def ask_about_denials(self, task: Task, report: Report, run: dict[str, Any]) -> None:
        """A run that did not end done while tools were denied (Claude Code in
        -p mode cannot ask for a permission), or that ended on a tool call a
        hook deferred (``stop_reason: "tool_deferred"``): held for a person with a
        question naming the tools, instead of retried blindly with the same
        permissions. `afk answer` puts it back, the answer in its brief."""
        if report.deferred is not None:  # a PreToolUse hook deferred a call
            call = describe_tool(report.deferred) if report.deferred else "a tool call"
            question = (
                f"the agent's {call} was deferred for a person: allow it (and run "
                "again), or say how else to do it"
            )
        else:
            question = (
                f"the agent was denied {report.denied()}: allow it (and run again), "
                "or say how else to do it"
            )
        run = {**run, "outcome": str(Outcome.NEEDS_INPUT)}
        self.q.ask(task, one_line(question, 1000), token=task.token, run=run)
        short = short_id(task.id)
        self.say(
            f"{task_name(task.id, task.title)}: held, needs input: {one_line(question, 300)} "
            f"(afk answer {short} TEXT)"
        )

    # -- approvals (issue 43) ---------------------------------------------------

    def _ask_for(self, task: Task) -> list[str]:
        """The --ask-for rules of a task's run: the loop's, then the task's."""
        return [*self.o.ask_for, *(r for r in task.ask_for or () if r not in self.o.ask_for)]

    def calls_outstanding(self, task: Task, report: Report, verdict: Verdict) -> Verdict:
        """What a run left of its task's calls, read once: calls waiting for a
        person (a deferred call, or one denied where the harness cannot defer)
        hold it, whatever else it said; a run that would end done while a call
        a person approved never ran (its hook never saw it again: issue 50
        item 2) is a failure, and the next run resumes the session to make it."""
        calls = self.q.outstanding_calls(task)
        waiting = [c for c in calls if c["decision"] is None]
        if waiting:
            said = ", ".join(f"request {w['id']}: {describe_tool(w)}" for w in waiting[:3])
            return Verdict(Outcome.NEEDS_APPROVAL, f"waiting for a person's approval ({said})")
        unused = [c for c in calls if c["decision"] == "approved"]
        if verdict.outcome is not Outcome.DONE or not unused:
            return verdict
        said = ", ".join(f"request {u['id']}: {describe_tool(u)}" for u in unused[:3])
        line = f"approved_call_not_made: a call a person approved never ran ({said})"
        report.failure = f"{line}\n\nmake it: it is allowed once, as approved"
        return Verdict(Outcome.TASK_FAILURE, line)

    def hold_for_approval(self, task: Task, run: dict[str, Any], line: str) -> None:
        """Held, no attempt spent, until a person decides: the loop goes on."""
        run = {**run, "outcome": str(Outcome.NEEDS_APPROVAL)}
        self.q.release(task, line[:1000], outcome=Outcome.NEEDS_APPROVAL, run=run, hold=True)
        self.say(
            f"{task_name(task.id, task.title)}: held, {line}: afk approvals; "
            "afk approve N or afk deny N"
        )

    def hold_over_budget(
        self, task: Task, run: dict[str, Any], over: tuple[float, float], line: str
    ) -> None:
        """A task whose runs cost its budget: held for a person, not retried."""
        spent, budget = over
        why = f"over budget: ${spent:.2f} spent of ${budget:.2f} ({line})"
        run = {**run, "outcome": str(Settled.OVER_BUDGET)}
        self.q.release(task, why, outcome=Settled.OVER_BUDGET, run=run, hold=True)
        self.say(
            f"{task_name(task.id, task.title)}: held, {why} "
            f"(afk retry {short_id(task.id)} --budget-usd N)"
        )

    # -- the agent ------------------------------------------------------------

    def _prompt(self, task: Task) -> str:
        return fit_prompt(f"{task.title}\n\n{resume_brief(self.q, str(task.id))}")

    def agent_env(self, task: Task) -> dict[str, str]:
        """The agent's environment: the loop's own without a secret of afk's
        (:func:`credential.for_agent`), its task's credential, and its broker."""
        env = credential.for_agent(
            {k: v for k, v in os.environ.items() if k not in credential.NAMES}
        )
        env.update(self.o.env)
        env.pop(credential.HOOK_TOKEN, None)  # (a person's: it acts for any task)
        env.update(credential.written(task.id, task.token))
        env.update({"AFK_AGENT_ID": task.agent_id, "AFK_ACCOUNT": self.o.account})
        if self.o.hook_secret:
            run = sign_run(self.o.hook_secret, str(task.id), task.token, self.o.account)
            env[credential.HOOK_TOKEN] = run
        if self.broker is not None:
            env.update(self.broker.given())
        rules = self._ask_for(task)
        if rules:  # what its hooks ask a person about (issue 43)
            env[approvals.RUN_APPROVALS] = json.dumps(
                {
                    "ask_for": rules,
                    "ttl": self.o.approval_ttl,
                    "on_timeout": self.o.on_approval_timeout,
                }
            )
        return env

    def _resumed(self, task: Task) -> list[str] | None:
        """The command that resumes the session a person decided a call of
        (:func:`~watchdog.agents.brief.resume_argv`), if any."""
        harness = harness_of(self.o.command)
        if harness is None or not harness.resumes or self.fresh:
            return None  # (a task that moved profile starts fresh: its brief)
        known = task.id in self.decided
        decided = self.decided[task.id] if known else self.q.approval_to_resume(task)
        return resume_argv(decided, self.o.command)

    def run_agent(
        self,
        task: Task,
        prompt: str,
        lost: threading.Event,
        spent: float | None = None,
        budget: float | None = None,
        signs: Signs | None = None,
        ws: Workspace | None = None,
        session: Any = None,
    ) -> Report:
        env = self.agent_env(task)
        if ws is not None:
            env.update(ws.env())
        if session is not None:  # the agent's own spans nest under its session
            env.update(
                {
                    k.upper(): v for k, v in tracing.headers_of(session).items()
                }  # TRACEPARENT, TRACESTATE
            )
            # the run by its id: the task's token is a credential, and the
            # agent's telemetry leaves the machine
            runs = [r["id"] for r in self.q.runs(task) if r["token"] == task.token]
            resource = f"afk.task_id={task.id}" + (f",afk.run_id={runs[-1]}" if runs else "")
            given = env.get("OTEL_RESOURCE_ATTRIBUTES")
            env["OTEL_RESOURCE_ATTRIBUTES"] = f"{given},{resource}" if given else resource
        if budget is not None:
            # what is left, for the agent's own cap (claude -p --max-budget-usd)
            env.update(credential.budget(budget - (spent or 0)))
        argv = self._resumed(task) or prompt_argv(self.o.command, prompt)
        if ws is not None or self.o.boundary is not None:
            # (a worktree holds only committed settings; a sandboxed run's
            # harness folder is its profile's own, whose settings it ignores)
            argv = with_hooks(argv, os.path.abspath(sys.executable))
        if self.o.boundary is not None:
            argv = isolated(argv)
        engine_log = sandbox.EngineLog() if self.o.boundary is not None else None
        with self._inside(argv, env, ws, log=engine_log is not None) as argv:
            if self.o.boundary is not None:
                report_extra = {"sandbox": self.o.boundary.record(self.o.command, env)}
            else:
                report_extra = {}
            report = self._start(argv, env, lost, signs, ws, engine_log)
        if engine_log is not None:
            report_extra["sandbox"]["hosts_tried"] = engine_log.record()
            for line in engine_log.unread:  # (another engine version's wording)
                self.say(f"warning: task {task.id}: the sandbox engine said of a host: {line}")
        report.extra.update(report_extra)
        if self.profile is not None:  # (the run ends under its profile's account)
            report.extra.update(profile=self.profile.name, account=self.profile.account)
        return report

    @contextlib.contextmanager
    def _inside(
        self, argv: list[str], env: dict[str, str], ws: Workspace | None, log: bool = False
    ) -> Iterator[list[str]]:
        """``argv`` inside the loop's boundary (as given without one): the
        run's own folder, its temporary folder in ``env``, removed after.
        ``log``: the engine's log on its stderr (an agent's run)."""
        boundary = self.o.boundary
        if boundary is None:
            yield argv
            return
        run_dir = reach.run_folder()
        try:
            os.mkdir(os.path.join(run_dir, "tmp"))
            env["TMPDIR"] = os.path.join(run_dir, "tmp")
            work = ws.path if ws is not None else os.getcwd()
            git_dir = git.common_dir(ws.path) if ws is not None else None
            harness = harness_of(argv) if log else None  # (a check runs no harness)
            self._harness_home(harness, env)
            yield boundary.wrap(argv, harness, env, work, run_dir, git_dir, log)
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)

    def _harness_home(self, harness: Harness | None, env: dict[str, str]) -> None:
        """A sandboxed run's harness state folder, its profile's own: the one
        its profile names (``--env CLAUDE_CONFIG_DIR=...``), else afk's for
        the profile (``homes/PROFILE/HARNESS`` in afk's home); made 0700. The
        person's own (``~/.claude``) is never the run's."""
        if harness is None or harness.home_variable is None:
            return
        if reach.harness_home(harness, env) is None:
            profile = self.profile.name if self.profile else reach.DEFAULT_PROFILE
            env[harness.home_variable] = str(profile_home(profile, harness.name))
        folder = Path(str(reach.harness_home(harness, env)))
        private(folder)
        give_home_hooks(harness, folder, os.path.abspath(sys.executable))

    def _start(
        self,
        argv: list[str],
        env: dict[str, str],
        lost: threading.Event,
        signs: Signs | None,
        ws: Workspace | None,
        engine_log: sandbox.EngineLog | None = None,
    ) -> Report:
        extra = {"engine_log": engine_log} if engine_log is not None else {}
        return self.start(
            argv,
            env,
            **extra,
            stop=self.stopped,
            lost=lost,
            limits=Limits(
                grace=self.settings.agent_grace_seconds,
                stall=self.o.stall_after or self.settings.stall_seconds,
                max_run=(
                    self.o.max_run if self.o.max_run is not None else self.settings.max_run_seconds
                )
                or None,
            ),
            signs=signs,
            cwd=ws.path if ws is not None else None,
        )

    def check_daily_budget(self) -> None:
        """Park the account until midnight once its runs cost its daily budget."""
        limit = self.settings.daily_budget_usd
        if not limit:
            return
        spent, midnight = self.accounts.spent_today(self.o.account, self.o.day_zone)
        if spent >= limit:
            reason = f"daily budget: ${spent:.2f} spent of ${limit:.2f} since midnight"
            self.accounts.park(self.o.account, "budget", reason, midnight)

    # -- sleeping -------------------------------------------------------------

    def _nap_until(self, until: datetime) -> None:
        self._nap(until, self.accounts.clock())

    def _nap(self, until: datetime, now: datetime) -> None:
        """Sleep until ``until`` by the database's clock (read as ``now``), a
        minute at most before looking again; a stop wakes it at once."""
        seconds = (until - now).total_seconds()
        self.stopped.wait(min(max(seconds, 0.05), MAX_NAP))

    def _local(self, when: datetime) -> str:
        return when.astimezone(self.tz).isoformat(timespec="seconds")

    def _alert(self, parking: Parking) -> None:
        if self.alert is None:
            return
        try:
            self.alert(parking)
        except Exception as exc:  # an alert that fails must not hide the reason
            self.say(f"warning: the alert was not sent: {type(exc).__name__}: {exc}")
