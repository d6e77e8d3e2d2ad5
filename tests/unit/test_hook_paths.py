"""Where the hooks and the service look for each other: the user's private
runtime folder first (no other user can predict a name there), else TMPDIR."""

from __future__ import annotations

import os

import pytest

from watchdog.agents import hooklink


@pytest.mark.parametrize(
    ("runtime_mode", "expected"),
    [
        (0o700, "runtime"),  # private: used
        (0o755, "runtime"),  # readable by others, writable by no one else: used
        (0o777, "tmp"),  # anyone may write there: not used
        (None, "tmp"),  # no such folder
    ],
)
def test_the_socket_is_in_the_private_runtime_folder_when_there_is_one(
    tmp_path, runtime_mode, expected
):
    runtime, tmp = tmp_path / "run", tmp_path / "tmp"
    if runtime_mode is not None:
        runtime.mkdir()
        runtime.chmod(runtime_mode)
    env = {"XDG_RUNTIME_DIR": str(runtime), "TMPDIR": str(tmp)}
    path = hooklink.socket_path(env)
    want = {
        "runtime": str(runtime / "afk-hooks" / "service.sock"),
        "tmp": str(tmp / f"afk-hooks-{os.getuid()}" / "service.sock"),
    }[expected]
    assert path == want


def test_a_runtime_folder_that_is_a_link_is_not_used(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    env = {"XDG_RUNTIME_DIR": str(tmp_path / "link"), "TMPDIR": str(tmp_path)}
    assert hooklink.socket_path(env) == str(tmp_path / f"afk-hooks-{os.getuid()}" / "service.sock")


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"AFK_HOOK_SOCKET": "off"}, None),
        ({"AFK_HOOK_SOCKET": " OFF "}, None),
        ({"AFK_HOOK_SOCKET": "/x/y.sock"}, "/x/y.sock"),
    ],
)
def test_a_chosen_socket_wins(env, expected):
    assert hooklink.socket_path(env) == expected


def test_a_folder_of_another_user_is_named_as_theirs(tmp_path):
    folder = tmp_path / "f"
    folder.mkdir(mode=0o700)
    uid = os.getuid()
    if uid == 0:  # a root-owned folder is trusted: give it to someone else
        os.chown(folder, 65534, 65534)
    else:
        uid += 1
    with pytest.raises(hooklink.Untrusted, match="not to this user"):
        hooklink.open_private(str(folder), uid=uid)


def test_a_folder_others_can_write_is_refused(tmp_path):
    folder = tmp_path / "f"
    folder.mkdir()
    folder.chmod(0o770)
    with pytest.raises(hooklink.Untrusted, match="writable by others"):
        hooklink.open_private(str(folder))


def test_a_link_is_refused_as_a_link(tmp_path):
    (tmp_path / "real").mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(hooklink.Untrusted, match="symbolic link"):
        hooklink.open_private(str(tmp_path / "link"))
