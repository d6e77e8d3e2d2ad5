"""A backlog written where people already write it: the documentation's Ralph
prd.json imported, re-imported, and its passes exported after two tasks are
done, against the real database and the real CLI."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from helpers import require_tool

BACKLOGS = Path(__file__).resolve().parents[2] / "docs" / "backlog.md"


def readme_prd() -> str:
    """The prd.json the documentation shows (the code block after its heading)."""
    text = BACKLOGS.read_text()
    section = text[text.index("**A Ralph `prd.json`.**") :]
    return re.search(r"```json\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]


@pytest.fixture
def prd_file(tmp_path):
    path = tmp_path / "prd.json"
    path.write_text(readme_prd())
    return path


def test_the_readmes_prd_is_imported_reimported_and_exported_byte_for_byte(afk, sql, prd_file):
    original = prd_file.read_bytes()
    out = afk.json("import", "prd", str(prd_file), "--agent", "night")
    assert len(out["enqueued"]) == 3 and out["duplicates"] == [] and out["passing"] == ["US-000"]
    rows = sql("SELECT title, idem_key, spec FROM afk_task ORDER BY ordinal")
    assert [r["idem_key"] for r in rows] == [
        "prd:todo-app:US-001",
        "prd:todo-app:US-002",
        "prd:todo-app:US-003",
    ]
    assert rows[0]["title"] == "Add a priority column to the tasks table"
    assert rows[0]["spec"]["acceptanceCriteria"][0] == "a migration adds priority (1-3, default 2)"
    assert rows[0]["spec"]["prd"] == {"name": "todo-app", "story": "US-001", "file": "prd.json"}

    again = afk("import", "prd", str(prd_file), "--agent", "night")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["enqueued"] == []
    assert sorted(json.loads(again.stdout)["duplicates"]) == [r["idem_key"] for r in rows]
    assert "nothing new" in again.stderr
    assert sql.one("SELECT count(*) FROM afk_task") == 3

    assert afk.json("export", "prd", str(prd_file)) == {"passes": [], "written": False}
    for _ in range(2):  # the first two, in priority order
        task = afk.json("claim", "--agent", "night")
        afk.json("done", task["id"], "--token", str(task["token"]))
    assert afk.json("export", "prd", str(prd_file)) == {
        "passes": ["US-001", "US-002"],
        "written": True,
    }
    after = prd_file.read_bytes()
    # byte for byte, but for the two values flipped
    first, second = [m.start() for m in re.finditer(rb'"passes": false', original)][:2]
    want = original[:first] + b'"passes": true' + original[first + 15 : second]
    want += b'"passes": true' + original[second + 15 :]
    assert after == want
    stories = {s["id"]: s["passes"] for s in json.loads(after)["userStories"]}
    assert stories == {"US-001": True, "US-002": True, "US-003": False, "US-000": True}
    assert afk.json("export", "prd", str(prd_file)) == {"passes": [], "written": False}
    assert prd_file.read_bytes() == after


def test_a_dry_run_prints_the_tasks_and_changes_nothing(afk, sql, prd_file):
    before = sql.fingerprint()
    out = afk.json("import", "prd", str(prd_file), "--agent", "night", "--dry-run")
    assert [t["key"] for t in out["tasks"]] == [
        "prd:todo-app:US-001",
        "prd:todo-app:US-002",
        "prd:todo-app:US-003",
    ]
    assert sql.fingerprint() == before
    original = prd_file.read_bytes()
    afk.json("import", "prd", str(prd_file), "--agent", "night")
    task = afk.json("claim", "--agent", "night")
    afk.json("done", task["id"], "--token", str(task["token"]))
    assert afk.json("export", "prd", str(prd_file), "--dry-run") == {
        "passes": ["US-001"],
        "written": False,
    }
    assert prd_file.read_bytes() == original


def test_with_a_repository_each_story_gets_a_branch_of_its_own(afk, sql, prd_file, tmp_path):
    require_tool("git")
    repo = tmp_path / "repo"
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "T",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "T",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True, env=env)
    subprocess.run(
        ["git", "commit", "-q", "--allow-empty", "-m", "first"], cwd=repo, check=True, env=env
    )
    afk.env["AFK_HOME"] = str(tmp_path / "afk-home")
    args = ["import", "prd", str(prd_file), "--agent", "night", "--repo", str(repo)]
    afk.json(*args, "--verify", "true")
    branches = sql("SELECT workspace->>'branch' AS b FROM afk_task ORDER BY ordinal")
    assert [r["b"] for r in branches] == [
        "ralph/priorities-US-001",
        "ralph/priorities-US-002",
        "ralph/priorities-US-003",
    ]
    # a re-import is not refused for the branches its own tasks hold
    assert afk.json(*args)["enqueued"] == []


@pytest.mark.parametrize(
    "text, said",
    [
        ("{ not json", "is not JSON"),
        ('{"project": "x"}', "no userStories"),
        ('{"userStories": [{"title": "no id"}]}', "has no id"),
        ('{"userStories": [{"id": "a", "title": "t"}, {"id": "a", "title": "u"}]}', "twice"),
    ],
)
def test_a_bad_prd_is_one_line_exit_2_and_enqueues_nothing(afk, sql, tmp_path, text, said):
    path = tmp_path / "prd.json"
    path.write_text(text)
    before = sql.fingerprint()
    for args in (["import", "prd", str(path), "--agent", "a"], ["export", "prd", str(path)]):
        proc = afk(*args)
        assert proc.returncode == 2, proc.stderr
        assert said in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
        assert proc.stdout == ""
    assert sql.fingerprint() == before
    assert path.read_text() == text


def test_a_missing_file_is_one_line_exit_2(afk, tmp_path):
    proc = afk("import", "prd", str(tmp_path / "nope.json"), "--agent", "a")
    assert proc.returncode == 2 and "cannot read" in proc.stderr


# -- GitHub issues, through a stub gh that answers from a JSON file ----------

GH_STUB = r'''#!/usr/bin/env python3
"""gh, as far as afk import github uses it: answers from $GH_STUB_DATA and
logs each call to $GH_STUB_LOG."""
import json, os, sys
args = sys.argv[1:]
data = json.load(open(os.environ["GH_STUB_DATA"]))
with open(os.environ["GH_STUB_LOG"], "a") as log:
    log.write(json.dumps(args) + "\n")
def opt(name):
    return args[args.index(name) + 1] if name in args else None
if args[:2] == ["auth", "status"]:
    if not data.get("logged_in", True):
        print("You are not logged into any GitHub hosts. To log in, run: gh auth login",
              file=sys.stderr)
        sys.exit(1)
    sys.exit(0)
if args[:2] == ["issue", "list"] and "raw_issues" in data:  # what gh printed, as it is
    print(json.dumps(data["raw_issues"]))
elif args[:2] == ["issue", "list"]:
    label, state = opt("--label"), opt("--state")
    out = [i for i in data["issues"]
           if (label is None or label in [l["name"] for l in i["labels"]])
           and (state in (None, "all") or i["state"].lower() == state)]
    print(json.dumps(out))
elif args[:2] == ["pr", "list"]:
    print(json.dumps(data.get("prs", [])))
elif args[:2] == ["issue", "view"]:
    (issue,) = [i for i in data["issues"] if str(i["number"]) == args[2]]
    print(json.dumps({"state": issue["state"]}))
else:
    print(f"unknown command {args}", file=sys.stderr)
    sys.exit(1)
'''


def issue(number, title, body="", state="OPEN", labels=("ready-for-agent",), prs=()):
    return {
        "number": number,
        "title": title,
        "body": body,
        "state": state,
        "url": f"https://github.com/acme/app/issues/{number}",
        "labels": [{"name": n} for n in labels],
        "closedByPullRequestsReferences": list(prs),
    }


@pytest.fixture
def gh(afk, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text(GH_STUB)
    (bin_dir / "gh").chmod(0o755)
    data = tmp_path / "gh.json"
    afk.env["PATH"] = f"{bin_dir}:{afk.env['PATH']}"
    afk.env["GH_STUB_DATA"] = str(data)
    afk.env["GH_STUB_LOG"] = str(tmp_path / "gh.log")

    def answer(**content):
        data.write_text(json.dumps(content))

    return answer


def test_github_issues_become_tasks_with_their_blocked_by_chain(afk, sql, gh):
    gh(
        issues=[
            issue(1, "Set up the schema", "Plain.", state="CLOSED"),
            issue(3, "Migrate the schema", "Blocked by #1"),
            issue(4, "Update the API", "Some text.\nBlocked by #3\n"),
            issue(5, "Update the client", "Depends on #4, #3"),
            issue(6, "Fix login", prs=[{"number": 9, "state": "OPEN", "url": "u"}]),
            issue(7, "Fix logout"),
            issue(8, "Not for the agent", labels=("question",)),
        ],
        prs=[{"number": 10, "headRefName": "fix/7-logout", "state": "MERGED", "url": "u"}],
    )
    out = afk.json("import", "github", "--repo", "acme/app", "--agent", "night")
    assert len(out["enqueued"]) == 3 and out["duplicates"] == []
    assert out["skipped"] == [
        {"number": 6, "reason": "pull request #9 (open) is linked"},
        {"number": 7, "reason": "pull request #10 (merged) is linked"},
    ]
    rows = sql("SELECT idem_key, state::text AS state, spec FROM afk_task ORDER BY ordinal")
    assert [(r["idem_key"], r["state"]) for r in rows] == [
        ("gh:acme/app#3", "todo"),  # its blocker #1 is closed: done
        ("gh:acme/app#4", "blocked"),
        ("gh:acme/app#5", "blocked"),
    ]
    assert rows[0]["spec"]["github"]["url"] == "https://github.com/acme/app/issues/3"
    task = afk.json("claim", "--agent", "night")
    afk.json("done", task["id"], "--token", str(task["token"]))
    states = sql("SELECT idem_key, state::text AS s FROM afk_task ORDER BY ordinal")
    assert [r["s"] for r in states] == ["done", "todo", "blocked"]

    again = afk("import", "github", "--repo", "acme/app", "--agent", "night")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["enqueued"] == [] and "nothing new" in again.stderr
    assert sql.one("SELECT count(*) FROM afk_task") == 3


@pytest.mark.parametrize(
    "setup, said",
    [
        ("missing", "gh is not installed"),
        ("logged out", "gh is not logged in"),
    ],
)
def test_github_without_gh_or_its_login_is_one_line_exit_1(afk, sql, gh, setup, said):
    gh(issues=[issue(1, "t")], logged_in=setup != "logged out")
    if setup == "missing":
        afk.env["PATH"] = "/nonexistent"
    before = sql.fingerprint()
    proc = afk("import", "github", "--repo", "acme/app", "--agent", "night")
    assert proc.returncode == 1, proc.stderr
    assert said in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert sql.fingerprint() == before


@pytest.mark.parametrize(
    "printed",
    [
        [{"title": "x"}],
        [{"number": "abc", "title": "x"}],
        [{"number": 1, "title": "x", "labels": ["str"]}],
        None,
        [{"number": 1, "title": "x", "body": 5}],
    ],
    ids=["no number", "number not a number", "labels not objects", "null", "body not text"],
)
def test_gh_json_afk_does_not_read_is_one_line_exit_2(afk, sql, gh, printed):
    """P33: JSON from gh that afk does not expect was an internal error (a
    KeyError, a TypeError...). One line, exit 2, nothing enqueued."""
    gh(raw_issues=printed, issues=[])
    before = sql.fingerprint()
    proc = afk("import", "github", "--repo", "acme/app", "--agent", "night")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "gh printed JSON afk does not read" in proc.stderr
    assert "internal error" not in proc.stderr
    assert sql.fingerprint() == before


def test_a_prd_nested_too_deeply_is_one_line_exit_2(afk, sql, tmp_path):
    """P32: import prd of a deeply nested file was a RecursionError."""
    deep = tmp_path / "prd.json"
    deep.write_text(
        '{"userStories":[{"id":"I","title":"x","notes":' + "[" * 100000 + "]" * 100000 + "}]}"
    )
    before = sql.fingerprint()
    proc = afk("import", "prd", str(deep), "--agent", "ph")
    assert proc.returncode == 2 and "nested too deeply" in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1
    assert sql.fingerprint() == before


def test_a_file_line_whose_workspace_field_is_not_text_is_one_line_exit_2(afk, sql, tmp_path):
    """P31: a --file line with "verify": 5 was an internal error."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    lines = tmp_path / "tasks.jsonl"
    for field, value in (("verify", 5), ("base", ["main"]), ("require_changes", "yes")):
        lines.write_text(json.dumps({"title": "v", "repo": str(repo), field: value}) + "\n")
        before = sql.fingerprint()
        proc = afk("enqueue", "--agent", "te", "--file", str(lines))
        assert proc.returncode == 2 and "internal error" not in proc.stderr, proc.stderr
        assert proc.stderr.count("\n") == 1 and "nothing was enqueued" in proc.stderr
        assert sql.fingerprint() == before


def test_one_issue_does_not_block_the_import_of_the_others(afk, sql, gh):
    """P24: issues whose "Blocked by" lines go round in a circle refused the
    whole import, and a body naming hundreds of blockers cost a gh call each
    and then refused it too. Those issues are skipped with the reason (with
    what waits on them), the others enqueued, and the blockers outside the
    list looked up in one call."""
    many = " ".join(f"#{n}" for n in range(1000, 1300))
    gh(
        issues=[
            issue(1, "one", "Blocked by #2"),
            issue(2, "two", "Depends on #1"),
            issue(3, "waits on one", "Blocked by #1"),
            issue(4, "fine"),
            issue(5, "greedy", f"Blocked by {many}"),
            issue(6, "closed blocker", "Blocked by #7"),
            issue(7, "done already", state="CLOSED", labels=()),
            # R7, R8: issues that cannot be tasks are skipped with the reason
            issue(8, "   "),
            issue(9, "t" * 20_000),
            issue(10, "a body over the limit", "x" * 5000),
            issue(11, "waits on a blank one", "Blocked by #8"),
        ]
    )
    out = afk.json(
        "import", "github", "--repo", "acme/app", "--agent", "night",
        env={"AFK_MAX_JSON_BYTES": "4096"},
    )  # fmt: skip
    reasons = {s["number"]: s["reason"] for s in out["skipped"]}
    assert "circle: #1 -> #2 -> #1" in reasons[1] and "circle" in reasons[2], reasons
    assert reasons[3] == "it is blocked by #1, which is skipped"
    assert reasons[5] == "it names more than 100 blockers"
    assert reasons[8] == "title must be a non-empty string"
    assert reasons[9].startswith("title is longer than ")
    assert reasons[10] == "its body is over the spec limit of 4096 bytes"
    assert reasons[11] == "it is blocked by #8, which is skipped"
    rows = sql("SELECT idem_key, state::text AS state FROM afk_task ORDER BY ordinal")
    assert [(r["idem_key"], r["state"]) for r in rows] == [
        ("gh:acme/app#4", "todo"),
        ("gh:acme/app#6", "todo"),  # its blocker is closed: done
    ]
    calls = [json.loads(line) for line in Path(afk.env["GH_STUB_LOG"]).read_text().splitlines()]
    assert not [c for c in calls if c[:2] == ["issue", "view"]]


def test_a_prd_with_a_bom_is_read_and_a_passes_that_is_no_boolean_is_refused(afk, sql, tmp_path):
    """P30: a prd.json saved with a BOM was "not JSON"; `"passes": "true"`
    (a string) was enqueued as not passing, without a word."""
    prd = {"project": "bom", "userStories": [{"id": "US-1", "title": "one", "passes": False}]}
    path = tmp_path / "prd.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(prd).encode())
    assert len(afk.json("import", "prd", str(path), "--agent", "b")["enqueued"]) == 1
    # done, its passes written back with the BOM kept (R8: an internal error)
    task = afk.json("claim", "--agent", "b")
    afk.json("done", task["id"], "--token", str(task["token"]))
    exported = afk("export", "prd", str(path))
    assert exported.returncode == 0, exported.stderr
    assert (
        path.read_bytes()
        == b"\xef\xbb\xbf" + json.dumps(prd).replace('"passes": false', '"passes": true').encode()
    )
    prd["userStories"][0]["passes"] = "true"
    path.write_text(json.dumps(prd))
    before = sql.fingerprint()
    proc = afk("import", "prd", str(path), "--agent", "b2")
    assert proc.returncode == 2 and "true or false" in proc.stderr, proc.stderr
    assert sql.fingerprint() == before
