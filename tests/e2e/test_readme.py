"""The README's and the documentation's examples, run as a reader runs them:
the first night (its lines, as written, with a stand-in `claude` on PATH that
runs the hooks the way Claude Code does), the Python API example, and the
install-and-demo command in a fresh virtual environment."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from helpers import HELPERS, ROOT, require_tool

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Reader",
    "GIT_AUTHOR_EMAIL": "reader@example.invalid",
    "GIT_COMMITTER_NAME": "Reader",
    "GIT_COMMITTER_EMAIL": "reader@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def block(path: Path, after: str, lang: str) -> str:
    """The first ``lang`` code block of ``path`` after the line ``after``."""
    text = path.read_text()
    start = text.index(after)
    found = re.search(rf"```{lang}\n(.*?)```", text[start:], re.S)
    assert found, f"no {lang} block after {after!r} in {path.name}"
    return found.group(1)


def work(title: str) -> list[dict[str, str]]:
    return [
        {"write": f"{title}.txt", "content": f"{title}\n"},
        {"bash": f"git add -A && git commit -q -m '{title}'"},
        {"say": f"{title}: done"},
    ]


def test_the_first_night_runs_as_the_readme_says(afk, tmp_path):
    require_tool("git")
    require_tool("make")  # (the README's check: make test)
    lines = [x for x in block(ROOT / "README.md", "<!-- first night", "sh").splitlines() if x]
    assert lines[0].startswith("afk enqueue") and any(x.startswith("afk loop") for x in lines)
    repo = tmp_path / "app"
    repo.mkdir()
    (repo / "Makefile").write_text("test:\n\ttest -f Makefile\n")
    env = {**afk.env, **GIT_ENV, "HOME": str(tmp_path / "home"), "AFK_HOME": str(tmp_path / "h")}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "first"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    claude = bin_dir / "claude"
    claude.write_text(
        f"#!{sys.executable}\nimport runpy\n"
        f"runpy.run_path({str(HELPERS / 'standin_claude.py')!r}, run_name='__main__')\n"
    )
    claude.chmod(0o755)
    plan = tmp_path / "plan.json"
    titles = ("Fix the flaky login test", "Document the config flags")
    plan.write_text(json.dumps({t: work(t) for t in titles}))
    env |= {
        "STANDIN_PLAN": str(plan),
        "STANDIN_LOG": str(tmp_path / "claude.jsonl"),
        # (`afk` as installed beside this interpreter, and the stand-in claude)
        "PATH": os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), env["PATH"]]),
    }
    out = {}
    for line in lines:
        proc = subprocess.run(["bash", "-c", line], cwd=repo, env=env, text=True,
                              capture_output=True, timeout=300)  # fmt: skip
        assert proc.returncode == 0, (line, proc.stdout, proc.stderr)
        out[line.split()[1]] = proc.stdout
    assert json.loads(out["status"])["done"] == 2, out["status"]
    for title in titles:
        assert title in out["review"], out["review"]
    assert out["review"].count("check: passed") == 2, out["review"]  # (the loop's --verify)
    assert "Done 2," in out["digest"], out["digest"]
    hooks = [json.loads(x) for x in (tmp_path / "claude.jsonl").read_text().splitlines()]
    assert any(h.get("event") == "PreToolUse" for h in hooks)  # the installed hooks ran


def test_the_python_api_example_runs(dsn, tmp_path, sql):
    code = block(ROOT / "docs" / "python-api.md", "# Python API", "python")
    script = "def run_the_agent(task):\n    print('working on', task.title)\n\n" + code
    env = {k: v for k, v in os.environ.items() if not k.startswith("AFK_")}
    proc = subprocess.run([sys.executable, "-c", script], env={**env, "AFK_DSN": dsn},
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "working on Fix the flaky test\n"
    row = sql("SELECT state::text, result FROM afk_task WHERE idem_key = 'issue-12'")[0]
    assert row == {"state": "done", "result": {"pr": 4711}}


def test_the_install_and_demo_command_works_in_a_fresh_folder(tmp_path):
    """The README's first command, as written, in a copy of the project (its
    own .venv), on an embedded server of its own."""
    command = block(ROOT / "README.md", "## Two commands", "sh").strip()
    assert command.endswith("afk demo"), command
    copy = tmp_path / "project"
    left_out = (
        ".git",
        ".venv*",
        "build",
        "__pycache__",
        "*.egg-info",
        "tests",
        "bench",
        ".*_cache",
    )
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(*left_out))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AFK_", "VIRTUAL_ENV"))}
    env["AFK_HOME"] = str(tmp_path / "afk-home")
    proc = subprocess.run(["bash", "-c", command], cwd=copy, env=env, text=True,
                          capture_output=True, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "resumes it from the checkpoint" in proc.stdout, proc.stdout[-2000:]
    assert '"done": 5, "failed": 0' in proc.stdout, proc.stdout[-2000:]
    subprocess.run(["bash", "-c", ".venv/bin/afk db stop"], cwd=copy, env=env,
                   capture_output=True, timeout=120)  # fmt: skip
