"""What the people around the agents see and do, as methods of the queue
(:class:`People` is one of :class:`~watchdog.queue.Queue`'s bases): an
agent's question and a person's answer, what a task's runs cost and a
raised budget, and the runs themselves. Its statements are
``sql/people.sql``."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .checks import check_budget, check_id, check_text
from .db import Database, json_param
from .errors import BadInput, NotRunning, TaskNotFound, redact, redact_json
from .fence import explain_fence
from .models import Task, TaskRef, task_id_of, task_ref


class People:
    """The questions, answers, costs, budgets and runs of the queue's tasks."""

    db: Database

    if TYPE_CHECKING:  # the queue's own, which these methods use

        def show(self, task: TaskRef) -> tuple[Task, list[dict[str, Any]]]: ...
        def _timeline(self) -> int: ...

    def ask(
        self,
        task: TaskRef,
        question: str,
        *,
        token: int | None = None,
        run: Mapping[str, Any] | None = None,
    ) -> int:
        """An agent's question to a person: its task is held (paused, not
        claimed again, no attempt spent) until :meth:`answer`, and the
        question goes into every later brief. Returns the question's id.
        ``run``: what a supervisor read of the run it ends (as :meth:`release`)."""
        task_id, token = task_ref(task, token)
        question = redact(check_text("question", question))  # (agent text: no secrets)
        row = self.db.one(
            "ask",
            {
                "id": task_id,
                "token": token,
                "question": question,
                "run": None if run is None else json_param(dict(run)),
            },
        )
        if row is None:
            raise TaskNotFound(f"no task with id {task_id}")
        if row["question_id"] is None:
            explain_fence(row, task_id, token, timeline=self._timeline)
        return int(row["question_id"])

    def answer(self, task: TaskRef, answer: str, *, who: str | None = None) -> Task:
        """A person's answer to a task's open questions: recorded, and the
        task back to todo."""
        task_id = task_id_of(task)
        answer = check_text("answer", answer)
        row = self.db.one("answer", {"id": task_id, "answer": answer, "who": who})
        if row is None:
            raise TaskNotFound(f"no task with id {task_id}")
        if row["question_id"] is None:
            raise NotRunning(f"task {task_id} has no open question; nothing was changed")
        return self.show(task_id)[0]

    def questions(self, agent_id: str | None = None) -> list[dict[str, Any]]:
        """The open questions (of one agent), oldest first."""
        if agent_id is not None:
            agent_id = check_id("agent id", agent_id)
        return self.db.all("questions", {"agent_id": agent_id})

    def task_questions(self, task: TaskRef) -> list[dict[str, Any]]:
        """A task's questions with their answers, in order."""
        return self.db.all("task_questions", {"id": task_id_of(task)})

    # -- approvals (issue 43) -------------------------------------------------

    def approval_for_call(
        self,
        task: TaskRef,
        token: int,
        *,
        harness: str,
        session: str | None,
        transcript: str | None,
        tool: str,
        tool_input: Any,
        call_hash: str,
        rule: str,
        ttl_seconds: float,
        on_timeout: str,
    ) -> dict[str, Any]:
        """What a run's PreToolUse answers a call an --ask-for rule names (see
        ``approval_for_call`` in people.sql): its action (lost, allow, deny,
        defer) and the request's decision, note and who decided."""
        row = self.db.row(
            "approval_for_call",
            {
                "id": task_id_of(task),
                "token": token,
                "harness": harness,
                "session": session,
                "transcript": transcript,
                "tool": tool[:200],
                # (shown to a person to decide: literal credentials masked,
                # never code where one would be)
                "input": json_param(redact_json(tool_input, literal_only=True)),
                "hash": call_hash,
                "rule": rule,
                "ttl": ttl_seconds,
                "on_timeout": on_timeout,
            },
        )
        return dict(row)

    def approvals(
        self, agent_id: str | None = None, *, everything: bool = False
    ) -> list[dict[str, Any]]:
        """The approval requests waiting for a person (all of them with
        ``everything``), oldest first."""
        if agent_id is not None:
            agent_id = check_id("agent id", agent_id)
        return self.db.all("approvals", {"agent_id": agent_id, "all": everything})

    def decide(
        self, approval_id: int, approve: bool, *, who: str | None, via: str, note: str | None = None
    ) -> dict[str, Any]:
        """A person approves or denies a request: its task is due again, and
        its next run resumes the session that asked. A request decided before
        changes nothing (NotRunning says how it was decided)."""
        if note is not None:
            note = check_text("note", note)[:2000]
        row = self.db.one(
            "decide_approval",
            {
                "approval": approval_id,
                "decision": "approved" if approve else "denied",
                "who": who,
                "via": via,
                "note": note,
            },
        )
        if row is None:
            raise BadInput(f"no approval request {approval_id}: `afk approvals` lists them")
        if not row["decided"]:
            raise NotRunning(
                f"approval request {approval_id} was {row['was']} already; nothing was changed"
            )
        return dict(row)

    def approval_to_resume(self, task: TaskRef) -> dict[str, Any] | None:
        """The decided request whose session a task's next run resumes."""
        row = self.db.one("approval_to_resume", {"id": task_id_of(task)})
        return dict(row) if row is not None else None

    def approval_decisions(self, task: TaskRef) -> list[dict[str, Any]]:
        """A task's decided requests whose call has not come back yet (its
        brief's: a fresh session follows them)."""
        return self.db.all("approval_decisions", {"id": task_id_of(task)})

    def approvals_waiting_for(self, agent_id: str) -> int:
        """How many tool calls of the agent's tasks wait for a person."""
        row = self.db.one("approvals_waiting_for", {"agent_id": check_id("agent id", agent_id)})
        return int(row["n"]) if row else 0

    def outstanding_calls(self, task: TaskRef) -> list[dict[str, Any]]:
        """A task's requests waiting for a person (decision None) and its
        approved calls that never ran, in one read."""
        return self.db.all("outstanding_calls", {"id": task_id_of(task)})

    def expire_approvals(self) -> list[dict[str, Any]]:
        """Requests past their time to live: denied (on_timeout deny), their
        tasks due again."""
        return self.db.all("expire_approvals", {})

    def record_lost_run(self, task: Task, run: Mapping[str, Any]) -> None:
        """What a supervisor read of a run whose lease it lost (reclaimed,
        paused, claimed again since): kept on that run, so that its cost
        counts against the budgets; ended as lease_lost if nothing ended it.
        Not fenced: the run is the lost token's own."""
        self.db.one("run_lost", {"id": task.id, "token": task.token, "run": json_param(dict(run))})

    def cost(self, task: TaskRef) -> tuple[float | None, float | None]:
        """What a task's runs cost so far (None: no run said), and its budget."""
        row = self.db.one("task_cost", {"id": task_id_of(task)})
        if row is None:
            raise TaskNotFound(f"no task with id {task_id_of(task)}")
        return row["spent"], row["budget_usd"]

    def rebudget(
        self, task_ids: Iterable[TaskRef], budget_usd: float, *, who: str | None = None
    ) -> list[uuid.UUID]:
        """Raise the budget of tasks held for it (or failed) and put them back
        to todo. All or nothing, as :meth:`retry`."""
        budget_usd = check_budget(budget_usd)
        ids = [task_id_of(t) for t in task_ids]
        if not ids:
            raise BadInput("no task ids given")
        rows = self.db.all("rebudget", {"ids": ids, "budget_usd": budget_usd, "who": who})
        found = {r["id"]: r for r in rows}
        missing = [str(i) for i in ids if i not in found]
        if missing:
            raise TaskNotFound(f"no task with id {', '.join(missing[:5])}; nothing was changed")
        stuck = [f"{i} ({r['state']})" for i, r in found.items() if not r["held"]]
        if stuck:
            raise NotRunning(
                "only tasks held for their budget, or failed, take a new budget: "
                f"{', '.join(stuck[:5])}; nothing was changed"
            )
        short = [
            f"{i} (${r['spent']:.2f} spent)" for i, r in found.items() if r["spent"] >= budget_usd
        ]
        if short:
            raise BadInput(
                f"a budget of ${budget_usd:.2f} is not above what the task has spent: "
                f"{', '.join(short[:5])}; nothing was changed"
            )
        return list(dict.fromkeys(ids))

    def runs(self, task: TaskRef) -> list[dict[str, Any]]:
        """The recorded runs of a task (claims made under an account), oldest first."""
        return self.db.all("runs", {"id": task_id_of(task)})
