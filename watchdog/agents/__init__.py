"""The agent wing: what afk knows of the agents it runs and watches.

One table per extension point: ``harnesses.HARNESS_TABLE`` (a record per
agent: its event names, settings, payload-in and answer-out adapters),
``harnesses.EVENT_TABLE`` (the hook events), ``outcome.Outcome`` with
``decide.decide`` (what the end of a run does to the task, the account and
the loop), ``reach`` (the one room of a run's boundary: every command and
what an agent may do with it, what a run reads, writes and reaches) and
``credential`` (the task credential's variable names). Around them: the
process runner (``process``), ``afk loop`` (``loop``), the hooks
(``hooks.run_hook``, the service's side in ``hookserver``, the client in
``hooklink``), parked accounts (``accounts``), the resume brief (``brief``)
and ``afk once`` (``once``).

This file imports nothing: ``hooklink`` is on every hook's fast path.
"""
