"""The ``afk`` command's entry point (and ``python -m watchdog``).

``afk hook`` runs before and after every tool call of an agent: it first asks
the watchdog service (:mod:`watchdog.agents.hooklink`), which needs nothing
but the standard library, and loads the command line (:mod:`watchdog.cli`,
the settings, the database driver) only when the service does not answer.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found,unused-ignore]
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # (the hook's process imports no more than it must)
    from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] != ["hook"]:
        if os.environ.get("AFK_BROKER") and not {"-h", "--help", "--version"} & set(argv):
            # inside a run: everything goes to its broker (the standard library
            # only: no parser, no settings, no database driver is loaded)
            from .agents import brokerlink

            return brokerlink.main(argv, None, os.environ)
        from .cli import main as cli_main

        return cli_main(argv)
    from .agents import hooklink

    if hooklink.parse_argv(argv[1:]) is None:  # (`afk hook --help`, a typo)
        from .cli import main as cli_main

        return cli_main(argv)
    _signal.signal(_signal.SIGALRM, hooklink.give_up)
    _signal.alarm(hooklink.HOOK_DEADLINE)  # the whole run, fast path and fallback alike
    hooklink.touch_alive(os.environ)
    payload = hooklink.read_stdin()
    answer = None if hooklink.unattended(payload) else hooklink.ask(argv[1:], payload, os.environ)
    if answer is not None:
        sys.stdout.write(answer["stdout"])
        sys.stderr.write(answer["stderr"])
        sys.stdout.flush()
        _signal.alarm(0)
        return 0
    if os.environ.get("AFK_HOOK_EXPLAIN") == "1":  # (afk doctor --live asks)
        why = "it is a StopFailure" if hooklink.unattended(payload) else hooklink.why_not
        sys.stderr.write(f"afk hook: answered by the database itself: {why}\n")
    from .cli import main as cli_main

    return cli_main(argv, payload=payload)


if __name__ == "__main__":
    sys.exit(main())
