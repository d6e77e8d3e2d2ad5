"""The documentation cannot drift: its reference pages are the code's own
(docs/generate.py), every page is in the site's navigation, and the README
stays a five-minute read. (CI builds the site: mkdocs build --strict.)"""

from __future__ import annotations

import runpy
import shutil

from helpers import ROOT

GENERATE = ROOT / "docs" / "generate.py"


def generator(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")  # (it sets its own width: put back after)
    return runpy.run_path(str(GENERATE))["main"]


def test_the_reference_pages_are_what_the_code_writes(monkeypatch, capsys):
    main = generator(monkeypatch)
    assert main(["generate.py", "--check"]) == 0, capsys.readouterr().err


def test_a_page_that_drifted_is_named(tmp_path, monkeypatch, capsys):
    main = generator(monkeypatch)
    shutil.copytree(ROOT / "docs" / "reference", tmp_path / "reference")
    assert main(["generate.py", "--check"], root=tmp_path) == 0
    page = tmp_path / "reference" / "settings.md"
    text = page.read_text()
    page.write_text(text.replace("`AFK_LEASE_SECONDS` | `120`", "`AFK_LEASE_SECONDS` | `60`"))
    assert main(["generate.py", "--check"], root=tmp_path) == 1
    assert capsys.readouterr().err == (
        "docs/reference/settings.md differs from the code: python docs/generate.py writes it\n"
    )


def test_the_readme_is_read_in_five_minutes():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250, len(lines)


def test_every_page_of_the_site_is_in_its_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    missing = sorted(p for p in pages if f": {p}\n" not in nav)
    assert pages and not missing, missing
