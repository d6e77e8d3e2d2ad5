"""Backlogs written where people already write them, read into tasks: a
Ralph ``prd.json`` (``afk import prd``), and its ``passes`` written back
(``afk export prd``).

Pure: text in, tasks or text out. The CLI enqueues what :func:`prd_tasks`
gives, and asks the queue which keys are done for :func:`prd_with_passes`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .checks import check_id
from .errors import BadInput
from .models import MAX_AFTER, NewTask, checked_new_task

#: a prd.json larger than this is not a backlog (and would be read whole)
MAX_PRD_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Prd:
    """What a prd.json asks for: a task per story not yet passing, in
    priority order (lowest number first, then the file's order)."""

    name: str  # its project, else the file's name: the keys' middle part
    branch: str | None  # its branchName
    tasks: list[NewTask]
    passing: list[str]  # the ids of the stories already passing (skipped)

    def story_branch(self, task: NewTask) -> str | None:
        """The branch of a story's worktree (with ``--repo``): the prd's
        branchName and the story's id, ``ralph/login-US-001``. Git checks a
        branch out in one worktree only, so stories worked side by side
        cannot share the prd's one branch."""
        if not self.branch:
            return None
        return f"{self.branch}-{task.spec['prd']['story']}"


def prd_key(name: str, story_id: str) -> str:
    return f"prd:{name}:{story_id}"


def read_prd(text: str, file_name: str) -> tuple[dict[str, Any], str]:
    """The document and its name, or BadInput naming what is wrong."""
    try:
        doc = json.loads(text.removeprefix("\ufeff"))  # (a BOM, as the hook accepts, P30)
    except ValueError as exc:
        raise BadInput(f"{file_name} is not JSON ({exc})") from None
    except RecursionError:  # (P32)
        raise BadInput(f"{file_name} is nested too deeply to be a prd.json") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("userStories"), list):
        raise BadInput(f"{file_name} has no userStories list: is it a Ralph prd.json?")
    project = doc.get("project")
    name = project.strip() if isinstance(project, str) and project.strip() else file_name
    return doc, check_id("the prd's project", name)


def story_ids(doc: Mapping[str, Any], file_name: str) -> list[str]:
    """Every story's id, as text, each once."""
    ids: list[str] = []
    for n, story in enumerate(doc["userStories"], 1):
        if not isinstance(story, dict):
            raise BadInput(f"{file_name}: story {n} is not an object")
        sid = story.get("id")
        if isinstance(sid, bool) or not isinstance(sid, str | int) or str(sid).strip() == "":
            raise BadInput(f"{file_name}: story {n} has no id")
        text = check_id(f"story {n}'s id", str(sid))
        if text in ids:
            raise BadInput(f"{file_name}: story id {text!r} is there twice")
        ids.append(text)
    return ids


def prd_tasks(text: str, file_name: str) -> Prd:
    """The tasks of a prd.json: one per story whose ``passes`` is not true."""
    doc, name = read_prd(text, file_name)
    ids = story_ids(doc, file_name)
    branch = doc.get("branchName")
    branch = branch.strip() if isinstance(branch, str) and branch.strip() else None
    order: list[tuple[float, int, NewTask]] = []
    passing: list[str] = []
    for n, (sid, story) in enumerate(zip(ids, doc["userStories"], strict=True)):
        passes = story.get("passes", False)
        if not isinstance(passes, bool):  # ("true" was not passing, without a word, P30)
            raise BadInput(f"{file_name}: story {sid!r} has passes {passes!r}: true or false")
        if passes:
            passing.append(sid)
            continue
        title = story.get("title")
        if not isinstance(title, str) or not title.strip():
            raise BadInput(f"{file_name}: story {sid!r} has no title")
        priority = story.get("priority")
        rank = (
            float(priority)
            if isinstance(priority, int | float) and not isinstance(priority, bool)
            else float("inf")
        )
        spec = {
            "prd": {"name": name, "story": sid, "file": file_name},
            **{
                k: story[k]
                for k in ("description", "acceptanceCriteria", "notes", "priority")
                if k in story
            },
        }
        order.append((rank, n, NewTask(title=title, spec=spec, key=prd_key(name, sid))))
    order.sort(key=lambda x: (x[0], x[1]))
    return Prd(name, branch, [t for _, _, t in order], passing)


def prd_with_passes(text: str, file_name: str, done: Iterable[str]) -> tuple[str, list[str]]:
    """The file's text with ``"passes": true`` for the stories ``done`` (by
    id) that did not pass yet, and the ids flipped. Nothing else changes:
    only the bytes of those values are replaced (or, for a story without a
    ``passes`` key, the key added before its closing brace)."""
    doc, _ = read_prd(text, file_name)
    ids = story_ids(doc, file_name)
    # a BOM (R8) is kept as it was, before the spans, which read JSON only
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    text = text.removeprefix(bom)
    wanted = set(done)
    edits: list[tuple[int, int, str]] = []
    flipped: list[str] = []
    for sid, (start, _, spans) in zip(ids, _story_spans(text), strict=True):
        if sid not in wanted:
            continue
        if "passes" in spans:
            a, b = spans["passes"]
            if text[a:b] != "true":
                edits.append((a, b, "true"))
                flipped.append(sid)
        else:  # no passes key: add one after its last member
            last = max((b for _, b in spans.values()), default=None)
            at = last if last is not None else start + 1
            edits.append((at, at, ', "passes": true' if last is not None else '"passes": true'))
            flipped.append(sid)
    for a, b, new in sorted(edits, reverse=True):
        text = text[:a] + new + text[b:]
    return bom + text, flipped


_DECODER = json.JSONDecoder()
_WS = " \t\r\n"


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def _members(text: str, i: int) -> Iterable[tuple[str, int, int]]:
    """Each key of the object opening at ``i``, with its value's span."""
    i = _skip(text, i + 1)
    if text[i] == "}":
        return
    while True:
        key, i = _DECODER.raw_decode(text, i)
        i = _skip(text, _skip(text, i) + 1)  # past the colon
        start = i
        _, i = _DECODER.raw_decode(text, i)
        yield str(key), start, i
        i = _skip(text, i)
        if text[i] == "}":
            return
        i = _skip(text, i + 1)  # past the comma


def _story_spans(text: str) -> list[tuple[int, int, dict[str, tuple[int, int]]]]:
    """Each story's span and the spans of its members' values, read from
    the text (the document is known to be valid JSON). A key given twice
    keeps its last span, as json.loads keeps its last value."""
    stories: list[tuple[int, int, dict[str, tuple[int, int]]]] = []
    for key, start, _ in _members(text, _skip(text, 0)):
        if key != "userStories":
            continue
        stories = []
        i = _skip(text, start + 1)
        while text[i] != "]":
            spans = {k: (a, b) for k, a, b in _members(text, i)}
            _, end = _DECODER.raw_decode(text, i)
            stories.append((i, end, spans))
            i = _skip(text, end)
            if text[i] == ",":
                i = _skip(text, i + 1)
    return stories


# -- GitHub issues (afk import github) -------------------------------------

#: "Blocked by #12", "Depends on #3, #4": the issues an issue waits for
_BLOCKED_BY = re.compile(r"^\s*(?:[-*]\s*)?(?:blocked by|depends on)\b(.*)$", re.I | re.M)
_ISSUE_NUMBER = re.compile(r"(?<![\w/])#(\d+)\b")


def gh_key(repo: str, number: int) -> str:
    return f"gh:{repo}#{number}"


def issue_refs(body: str | None) -> list[int]:
    """The issue numbers a body's "Blocked by #N" / "Depends on #N" lines name."""
    found: list[int] = []
    for line in _BLOCKED_BY.finditer(body or ""):
        for n in _ISSUE_NUMBER.findall(line.group(1)):
            if int(n) not in found:
                found.append(int(n))
    return found


def named_after(branch: str, number: int) -> bool:
    """Whether a branch is named after issue ``number``: the number as a
    word of its name (``fix/12``, ``12-login``, ``issue-12``), not a part
    of another number."""
    return re.search(rf"(?<![0-9]){number}(?![0-9])", branch) is not None


@dataclass(frozen=True)
class Issues:
    tasks: list[NewTask]
    skipped: list[dict[str, Any]]  # {"number", "reason"}


def gh_shaped(issues: Any, prs: Any) -> None:
    """BadInput, in one line, unless gh's JSON has the shape afk reads
    (P33: a number that is no number, labels that are not objects, null)."""

    def number(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    def text(value: Any, empty: bool = False) -> bool:
        return isinstance(value, str) or (empty and value is None)

    def objects(value: Any) -> bool:
        return value is None or (
            isinstance(value, list) and all(isinstance(v, dict) for v in value)
        )

    unread = "gh printed JSON afk does not read"
    if not isinstance(issues, list) or not all(isinstance(i, dict) for i in issues):
        raise BadInput(f"{unread}: the issues are not a list of objects")
    for i in issues:
        shown = i.get("number") if number(i.get("number")) else "?"
        if not (number(i.get("number")) and text(i.get("title")) and text(i.get("body"), True)
                and objects(i.get("labels"))
                and objects(i.get("closedByPullRequestsReferences"))
                and all(text(lbl.get("name"), True) for lbl in i.get("labels") or [])):  # fmt: skip
            raise BadInput(
                f"gh printed JSON afk does not read: issue {shown} is not shaped as gh's"
            )
    if not isinstance(prs, list) or not all(
        isinstance(p, dict) and number(p.get("number")) for p in prs
    ):
        raise BadInput(
            "gh printed JSON afk does not read: the pull requests are not shaped as gh's"
        )


def github_tasks(
    repo: str,
    issues: list[Mapping[str, Any]],
    prs: list[Mapping[str, Any]],
    closed: Iterable[int] = (),
    max_spec_bytes: int | None = None,
) -> Issues:
    """A task per open issue, in number order, with its "Blocked by"
    dependencies; an issue with an open or merged pull request linked (one
    that closes it, or whose branch is named after it) is skipped with that
    reason. ``closed`` are issues named as blockers that are closed: done,
    so not waited for. An issue that cannot be a task (a blank title, one
    or a body over the limits: ``max_spec_bytes``, the queue's) is skipped
    with the reason the enqueue would give (R7: one bad issue stops none of
    the others)."""
    done = set(closed)
    live = [p for p in prs if str(p.get("state", "")).upper() in ("OPEN", "MERGED")]
    tasks: list[NewTask] = []
    skipped: list[dict[str, Any]] = []
    unusable: set[str] = set()  # the keys of issues that can never be tasks
    for issue in sorted(issues, key=lambda i: int(i["number"])):
        number = int(issue["number"])
        if str(issue.get("state", "OPEN")).upper() != "OPEN":
            skipped.append({"number": number, "reason": "closed"})
            continue
        linked = [
            p
            for p in issue.get("closedByPullRequestsReferences") or []
            if str(p.get("state", "OPEN")).upper() in ("OPEN", "MERGED")
        ]
        linked += [p for p in live if named_after(str(p.get("headRefName", "")), number)]
        if linked:
            pr = linked[0]
            skipped.append(
                {
                    "number": number,
                    "reason": f"pull request #{pr.get('number')} "
                    f"({str(pr.get('state', 'open')).lower()}) is linked",
                }
            )
            continue
        after = [gh_key(repo, n) for n in issue_refs(issue.get("body")) if n not in done]
        if gh_key(repo, number) in after:
            after.remove(gh_key(repo, number))  # "blocked by" itself: nothing to wait for
        if len(after) > MAX_AFTER:  # (anyone who can open an issue writes its body)
            skipped.append({"number": number, "reason": f"it names more than {MAX_AFTER} blockers"})
            unusable.add(gh_key(repo, number))
            continue
        task = NewTask(
            title=str(issue["title"]),
            spec={
                "github": {"repo": repo, "number": number, "url": issue.get("url")},
                "body": issue.get("body") or "",
                "labels": [lbl.get("name") for lbl in issue.get("labels") or []],
            },
            key=gh_key(repo, number),
            after=after or None,
        )
        try:
            checked_new_task(task)
            size = len(json.dumps(task.spec, ensure_ascii=False).encode())
            if max_spec_bytes is not None and size > max_spec_bytes:
                raise BadInput(f"its body is over the spec limit of {max_spec_bytes} bytes")
        except BadInput as exc:
            skipped.append({"number": number, "reason": str(exc)})
            unusable.add(gh_key(repo, number))
            continue
        tasks.append(task)
    return _without_cycles(tasks, skipped, unusable)


def _without_cycles(
    tasks: list[NewTask], skipped: list[dict[str, Any]], unusable: Iterable[str] = ()
) -> Issues:
    """The issues whose "Blocked by" lines go round in a circle (P24: one
    issue's body refused the whole import) skipped with the circle named, and
    those that wait on a skipped one (``unusable``: the keys of issues that
    can never be tasks, skipped already) with it; the rest as they were."""
    by_key = {str(t.key): t for t in tasks}  # (each has its gh: key)
    number = {k: int(k.rsplit("#", 1)[1]) for k in [*by_key, *unusable]}
    out: dict[str, str] = {}  # key -> why it is skipped

    def circle_from(start: str) -> list[str] | None:
        path, seen = [start], {start}
        stack = [iter(by_key[start].after or [])]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                stack.pop()
                path.pop()
                continue
            if nxt == start:
                return path
            if nxt in by_key and nxt not in seen:
                seen.add(nxt)
                path.append(nxt)
                stack.append(iter(by_key[nxt].after or []))
        return None

    for key in by_key:
        if key in out:
            continue
        circle = circle_from(key)
        if circle:
            shown = " -> ".join(f"#{number[k]}" for k in [*circle, key])
            for k in circle:
                out.setdefault(k, f"its blockers go round in a circle: {shown}")
    changed = True
    while changed:  # what waits on a skipped issue waits for nothing that comes
        changed = False
        for key, task in by_key.items():
            gone = [a for a in task.after or [] if a in out or a in unusable]
            if key not in out and gone:
                out[key] = f"it is blocked by #{number[gone[0]]}, which is skipped"
                changed = True
    kept = [t for t in tasks if str(t.key) not in out]
    more = [{"number": number[k], "reason": why} for k, why in out.items()]
    return Issues(kept, sorted([*skipped, *more], key=lambda s: int(s["number"])))
