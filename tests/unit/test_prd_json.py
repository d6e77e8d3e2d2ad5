"""A prd.json read into tasks and its passes written back: pure text in,
tasks or text out (watchdog.backlogs)."""

from __future__ import annotations

import json

import pytest

from watchdog.backlogs import prd_tasks, prd_with_passes
from watchdog.errors import BadInput


def prd(*stories: dict[str, object], **top: object) -> str:
    return json.dumps({**top, "userStories": list(stories)}, indent=2)


def test_stories_become_tasks_in_priority_order_then_the_files():
    text = prd(
        {"id": "c", "title": "third", "priority": 3},
        {"id": "a", "title": "first", "priority": 1, "acceptanceCriteria": ["x"]},
        {"id": "n", "title": "no priority"},
        {"id": "b", "title": "also second", "priority": 2},
        {"id": "b2", "title": "second", "priority": 2},
        {"id": "p", "title": "passing", "priority": 0, "passes": True},
        {"id": 7, "title": "a number id", "priority": 2.5},
        project="shop",
    )
    got = prd_tasks(text, "prd.json")
    assert [t.key for t in got.tasks] == [
        "prd:shop:a",
        "prd:shop:b",
        "prd:shop:b2",
        "prd:shop:7",
        "prd:shop:c",
        "prd:shop:n",
    ]
    assert got.passing == ["p"]
    first = got.tasks[0]
    assert first.title == "first"
    assert first.spec == {
        "prd": {"name": "shop", "story": "a", "file": "prd.json"},
        "acceptanceCriteria": ["x"],
        "priority": 1,
    }


@pytest.mark.parametrize(
    "top, name, branch",
    [
        ({"project": "shop", "branchName": "ralph/x"}, "shop", "ralph/x-a"),
        ({"project": "  "}, "backlog.json", None),
        ({}, "backlog.json", None),
    ],
)
def test_the_keys_name_the_project_else_the_file(top, name, branch):
    got = prd_tasks(prd({"id": "a", "title": "t"}, **top), "backlog.json")
    assert got.name == name and got.tasks[0].key == f"prd:{name}:a"
    assert got.story_branch(got.tasks[0]) == branch


@pytest.mark.parametrize(
    "text, said",
    [
        ("{not json", "is not JSON"),
        ("[]", "no userStories"),
        ('{"userStories": {}}', "no userStories"),
        ('{"userStories": [1]}', "story 1 is not an object"),
        ('{"userStories": [{"title": "t"}]}', "story 1 has no id"),
        ('{"userStories": [{"id": "", "title": "t"}]}', "story 1 has no id"),
        ('{"userStories": [{"id": true, "title": "t"}]}', "story 1 has no id"),
        ('{"userStories": [{"id": "a", "title": "t"}, {"id": "a", "title": "u"}]}', "twice"),
        ('{"userStories": [{"id": 1, "title": "t"}, {"id": "1", "title": "u"}]}', "twice"),
        ('{"userStories": [{"id": "a"}]}', "has no title"),
        ('{"userStories": [{"id": "a\\nb", "title": "t"}]}', "control characters"),
    ],
)
def test_a_bad_prd_is_one_clear_line(text, said):
    with pytest.raises(BadInput, match=said):
        prd_tasks(text, "prd.json")


@pytest.mark.parametrize(
    "text, done, want, flipped",
    [
        # two-space indent, the usual shape
        (
            '{\n  "userStories": [\n    {"id": "a", "passes": false},\n'
            '    {"id": "b", "passes": false}\n  ]\n}\n',
            ["b"],
            '{\n  "userStories": [\n    {"id": "a", "passes": false},\n'
            '    {"id": "b", "passes": true}\n  ]\n}\n',
            ["b"],
        ),
        # tabs, CRLF, spaces around the colon, keys after passes
        (
            '{\r\n\t"userStories" : [ {\r\n\t\t"passes" :  false ,\r\n\t\t"id":"a"\r\n\t} ]\r\n}',
            ["a"],
            '{\r\n\t"userStories" : [ {\r\n\t\t"passes" :  true ,\r\n\t\t"id":"a"\r\n\t} ]\r\n}',
            ["a"],
        ),
        # a passes inside another key's value is not the story's
        (
            '{"userStories":[{"id":"a","notes":{"passes":false},"passes":false}]}',
            ["a"],
            '{"userStories":[{"id":"a","notes":{"passes":false},"passes":true}]}',
            ["a"],
        ),
        # no passes key: one is added after the last member
        (
            '{"userStories": [{"id": "a", "title": "t"}]}',
            ["a"],
            '{"userStories": [{"id": "a", "title": "t", "passes": true}]}',
            ["a"],
        ),
        # already true, or not done: nothing changes
        (
            '{"userStories": [{"id": "a", "passes": true}, {"id": "b", "passes": false}]}',
            ["a"],
            '{"userStories": [{"id": "a", "passes": true}, {"id": "b", "passes": false}]}',
            [],
        ),
        # a key given twice: the last counts, as for json.loads
        (
            '{"userStories": [{"id": "a", "passes": true, "passes": false}]}',
            ["a"],
            '{"userStories": [{"id": "a", "passes": true, "passes": true}]}',
            ["a"],
        ),
        # a number id, unicode elsewhere
        (
            '{"project": "caf\u00e9", "userStories": [{"id": 3, "passes": false}]}',
            ["3"],
            '{"project": "caf\u00e9", "userStories": [{"id": 3, "passes": true}]}',
            ["3"],
        ),
        # saved with a BOM (R8): kept, and nothing else changes
        (
            '\ufeff{"userStories": [{"id": "a", "passes": false}]}',
            ["a"],
            '\ufeff{"userStories": [{"id": "a", "passes": true}]}',
            ["a"],
        ),
        (
            '\ufeff {"userStories": [{"id": "a"}]}',
            ["a"],
            '\ufeff {"userStories": [{"id": "a", "passes": true}]}',
            ["a"],
        ),
    ],
)
def test_passes_are_written_back_changing_no_other_byte(text, done, want, flipped):
    got, ids = prd_with_passes(text, "prd.json", done)
    assert (got, ids) == (want, flipped)
    assert json.loads(got.removeprefix("\ufeff"))["userStories"] == [
        {**s, **({"passes": True} if str(s["id"]) in done else {})}
        for s in json.loads(text.removeprefix("\ufeff"))["userStories"]
    ]


# -- GitHub issues -----------------------------------------------------------


@pytest.mark.parametrize(
    "body, refs",
    [
        ("Blocked by #12", [12]),
        ("text\n- Depends on #3, #4 and #3\nmore", [3, 4]),
        ("blocked BY #7.", [7]),
        ("We are blocked by nothing. See #9", []),
        ("Mentions #5 but is not blocked", []),
        ("Blocked by acme/other#5", []),
        ("Depends on #1\nBlocked by #2", [1, 2]),
        ("", []),
    ],
)
def test_blocked_by_lines_name_issues(body, refs):
    from watchdog.backlogs import issue_refs

    assert issue_refs(body) == refs


@pytest.mark.parametrize(
    "branch, number, named",
    [
        ("fix/12", 12, True),
        ("12-login", 12, True),
        ("issue-12-login", 12, True),
        ("fix/123", 12, False),
        ("v112", 12, False),
        ("main", 12, False),
    ],
)
def test_a_branch_is_named_after_an_issue_by_its_number_as_a_word(branch, number, named):
    from watchdog.backlogs import named_after

    assert named_after(branch, number) is named


def test_an_issue_blocked_by_itself_waits_for_nothing():
    from watchdog.backlogs import github_tasks

    got = github_tasks("o/r", [{"number": 2, "title": "t", "body": "Blocked by #2"}], [])
    assert got.tasks[0].after is None and got.tasks[0].key == "gh:o/r#2"
