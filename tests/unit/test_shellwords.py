"""Rules match commands, not text (issue 50 item 5): a shell command read by
tree-sitter-bash into the simple commands it runs, wrappers and git's global
options set aside; what hides what runs is said. A row per shape."""

from __future__ import annotations

import pytest

from watchdog.agents import approvals
from watchdog.agents.shellwords import commands

PUSH = approvals.parse("Bash(git push:*)")


@pytest.mark.parametrize(
    "command",
    [
        "git push origin main",
        "git  push origin main",  # two spaces
        "(git push origin main)",  # a subshell
        "/usr/bin/git push",  # an absolute path
        "git -C . push",  # git's global options
        "git -c core.editor=true --no-pager push",
        "git --git-dir=.git --work-tree . push",
        "env git push",
        "env FOO=1 -u BAR git push",
        "FOO=1 git push",
        "command git push",
        "exec git push",
        "nice -n 5 git push",
        "timeout 30 git push",
        "timeout -s KILL 30 git push",
        "nohup git push &",
        "echo origin | xargs git push",
        "xargs -I R git push R < remotes",
        "cd x && git push",
        "make lint; git push || true",
        "echo $(git push)",
        "echo `git push`",
        "sh -c 'git push origin main'",
        'bash -c "cd x && git push"',
        "sh -c 'sh -c \"git push\"'",  # nested
        "g\\it push",  # a backslash the shell removes
        "'git' \"push\"",  # quoted words
        "if true; then git push; fi",
        "for r in a b; do git push $r; done",
        "f() { git push; }; f",
        # siblings found reading the change once more
        "coproc git push",
        "busybox sh -c 'git push'",
        "sudo -u me git push",
        "doas git push",
        "watch -n 5 git push",
        "chronic git push",
        "taskset -c 0 git push",
        "flock /tmp/lock git push",
        "find . -maxdepth 0 -exec git push ';'",
        "cat <(git push)",
        "x=$(git push)",
        "! git push",
    ],
)
def test_every_shell_form_of_a_push_is_asked_about(command):
    assert approvals.matches(PUSH, "Bash", {"command": command}), commands(command)


@pytest.mark.parametrize(
    "command",
    [
        'eval "$CMD"',  # indirection: what runs is not in the text
        "$GIT push",
        "${GIT} push",
        'sh -c "$X"',
        'bash -c "git $(echo push)"',
        "source ./push.sh",
        ". ./push.sh",
        "echo 'unterminated",  # does not parse
        "echo 'git push' | sh",  # a shell reading its script from its input
        "bash <<EOF\ngit push\nEOF",
        "sh -s < push.sh",
        "shopt -s expand_aliases; alias g=git; g push",
        "git -c alias.p=push p",
        "env -S 'git push'",
        "$'git' push",
        "flock -c 'git push' /tmp/lock",
    ],
)
def test_what_hides_what_runs_is_asked_about_never_let_through(command):
    assert commands(command) is None
    assert approvals.matches(PUSH, "Bash", {"command": command})


@pytest.mark.parametrize(
    "command",
    [
        "git status",
        "git log --grep 'git push'",  # the words are an argument
        "echo git push",
        "make push",  # programs started by programs are not looked into
        "bash ./scripts/release.sh",
        "git pushy",  # not the word push
        "printf '%s' \"git push\"",
    ],
)
def test_what_does_not_run_a_push_is_not_asked_about(command):
    assert commands(command) is not None
    assert not approvals.matches(PUSH, "Bash", {"command": command}), commands(command)


def test_the_words_of_each_simple_command():
    assert commands("env A=1 /usr/bin/git -C . push origin && ls -l | wc -l") == [
        ["git", "push", "origin"],
        ["ls", "-l"],
        ["wc", "-l"],
    ]


@pytest.mark.parametrize(
    ("rule", "said"),
    [
        ("bash(git push:*)", "write Bash"),
        ("Bsh(git push:*)", "not a tool"),
        ("BASH", "write Bash"),
        ("Bash(git push:*))", "unbalanced"),
        ("Bash(git (push:*)", "unbalanced"),
        ("", "not a permission rule"),
    ],
)
def test_a_rule_with_a_wrong_tool_or_an_unbalanced_pattern_is_refused(rule, said):
    from watchdog.errors import BadInput

    with pytest.raises(BadInput, match=said):
        approvals.parse(rule)
