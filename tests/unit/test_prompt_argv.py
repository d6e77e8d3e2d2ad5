"""How the loop puts the prompt on an agent's command line, so that a title
starting with "-" is the prompt and never an option."""

from __future__ import annotations

import pytest

from watchdog.agents.harnesses import prompt_argv

P = "- [ ] fix the login page"


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        (
            ["claude", "-p", "--output-format", "json"],
            ["claude", "-p", "--output-format", "json", "--", P],
        ),
        (["/usr/local/bin/claude", "-p"], ["/usr/local/bin/claude", "-p", "--", P]),
        # a command that ends its options itself keeps its own --
        (
            ["claude", "-p", "--allowedTools", "Bash", "--"],
            ["claude", "-p", "--allowedTools", "Bash", "--", P],
        ),
        (["codex", "exec", "--json"], ["codex", "exec", "--json", "--", P]),
        # Gemini CLI's -p takes the prompt as its value: attached, it is never an option
        (["gemini", "--yolo", "-p"], ["gemini", "--yolo", f"--prompt={P}"]),
        (["gemini", "--prompt"], ["gemini", f"--prompt={P}"]),
        # anything else gets the prompt as given (the README: end it with -- yourself)
        (["./agent.sh", "--fast"], ["./agent.sh", "--fast", P]),
        (["sh", "-c", 'claude -p "$1"', "sh"], ["sh", "-c", 'claude -p "$1"', "sh", P]),
    ],
)
def test_the_prompt_is_never_read_as_an_option(command, argv):
    assert prompt_argv(command, P) == argv
