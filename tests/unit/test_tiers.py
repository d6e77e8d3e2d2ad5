"""The tiers keep their word: a unit test that starts a process, opens a
socket or connects to a database fails (tests/conftest.py guards it), so
`-m unit` stays fast and process-free."""

from __future__ import annotations

import socket
import subprocess

import psycopg
import pytest


def test_a_unit_test_cannot_start_a_process():
    with pytest.raises(pytest.fail.Exception, match="started a process"):
        subprocess.run(["true"], check=False)


def test_a_unit_test_cannot_open_a_socket():
    with socket.socket() as s, pytest.raises(pytest.fail.Exception, match="opened a connection"):
        s.connect(("127.0.0.1", 9))


def test_a_unit_test_cannot_connect_to_a_database():
    with pytest.raises(pytest.fail.Exception, match="connected to a database"):
        psycopg.connect("postgresql://nobody@127.0.0.1:9/none")
