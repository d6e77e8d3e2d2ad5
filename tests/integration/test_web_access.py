"""The status pages' access rule, redirects and paths, on a real HTTP server
(the service's own WSGI server, in-process) and a real database: the
round-three review's N10, N11, N14, N25-N29, N61, N62."""

from __future__ import annotations

import urllib.parse

import httpx
import pytest

from watchdog import NewTask
from watchdog.config import DigestSettings
from watchdog.db import Database
from watchdog.metrics import Metrics, serve
from watchdog.web import StatusPages

TOKEN = "t0ken;with space"


@pytest.fixture
def pages(dsn):
    """Serve the pages with a token, bound to loopback; yields (base URL, db)."""
    servers = []

    def start(token: str = TOKEN, host: str = "127.0.0.1", require_token: bool = False) -> str:
        db = Database(dsn, pool_size=2)
        app = StatusPages(db, DigestSettings(), token=token, host=host, require_token=require_token)
        server, _ = serve(Metrics(), "127.0.0.1", 0, lambda: True, pages=app)
        servers.append((server, db))
        return f"http://127.0.0.1:{server.server_port}"

    yield start
    for server, db in servers:
        server.shutdown()
        server.server_close()
        db.close()


def get(url: str, **kw):
    return httpx.get(url, follow_redirects=False, timeout=10, **kw)


@pytest.mark.parametrize(
    "path",
    [
        "/x%0d%0aSet-Cookie:%20pwn=1%0d%0aX-Injected:%20yes",
        "/%2F%2Fother-host/",
        "//other-host/",
        "/%5Cother",
        "/%5C%5Cother/x",
        "/\\other",
    ],
)
def test_the_token_redirect_stays_on_this_site_in_one_header(pages, path):
    base = pages(require_token=True)
    token = urllib.parse.quote(TOKEN, safe="")
    r = get(f"{base}{path}?token={token}&state=todo")
    assert r.status_code == 303
    location = r.headers["location"]
    assert location.startswith("/") and not location.startswith(("//", "/\\"))
    assert "\r" not in location and "\n" not in location
    assert "x-injected" not in r.headers and r.headers.get_list("set-cookie") == [
        r.headers["set-cookie"]
    ]
    assert urllib.parse.urlsplit(location).netloc == ""
    assert "state=todo" in location and "token" not in location


def test_a_token_with_a_semicolon_or_a_space_works_as_a_cookie(pages, queue):
    queue.enqueue("a", [NewTask("t")])
    base = pages(require_token=True)
    with httpx.Client(follow_redirects=True, timeout=10) as client:
        r = client.get(f"{base}/agents/a?token={urllib.parse.quote(TOKEN, safe='')}")
        assert r.status_code == 200 and r.url.path == "/agents/a"
        assert client.get(base + "/").status_code == 200  # the cookie alone


def test_loopback_can_require_the_token_behind_a_proxy(pages):
    open_base = pages(token="", host="127.0.0.1")
    assert get(open_base + "/").status_code == 200
    guarded = pages(token=TOKEN, host="127.0.0.1", require_token=True)
    assert get(guarded + "/").status_code == 403
    assert get(guarded + "/", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_require_token_without_a_token_is_refused():
    from watchdog.config import ServiceSettings
    from watchdog.errors import BadInput

    with pytest.raises(BadInput, match="web_require_token"):
        ServiceSettings(web_require_token=True)
    with pytest.raises(BadInput, match="printable"):
        ServiceSettings(web_token="tab\there")


@pytest.mark.parametrize(
    "agent", ["ünïcødé 修复", "slash/agent", "a%41b", "..", ".", "a b?c#d", "<script>x</script>"]
)
def test_any_agent_id_links_to_its_own_page(pages, queue, agent):
    queue.enqueue(agent, [NewTask(f"task of {agent}")])
    queue.enqueue("decoy", [NewTask("decoy task")])
    base = pages(token="")
    overview = get(base + "/").text
    import html
    import re

    links = [html.unescape(h) for h in re.findall(r'href="(/agents[^"]*)"', overview)]
    mine = [h for h in links if "decoy" not in h and h != "/agents/"]
    assert len(mine) == 1, links
    with httpx.Client(base_url=base, timeout=10) as client:
        page = client.get(mine[0])
    assert page.status_code == 200
    assert html.escape(f"task of {agent}") in page.text, (mine[0], page.text[:500])


@pytest.mark.parametrize(
    "path, status",
    [
        ("/agents/%00", 404),
        ("/agents/a?state=bogus", 400),
        ("/agents/a?after=1e3", 400),
        ("/agents/a?after=-1", 400),
        ("/tasks/not-a-uuid", 404),
    ],
)
def test_bad_paths_and_parameters_answer_one_line_4xx(pages, path, status):
    base = pages(token="")
    r = get(base + path)
    assert r.status_code == status, (path, r.text[:300])
    assert "Traceback" not in r.text


def test_the_overview_puts_busy_agents_first_and_an_index_finds_the_rest(pages, queue, sql):
    """N30: 600 idle agents named before the one that runs a task: the busy
    one is on the overview all the same, and /agents lists and searches all."""
    import re

    for i in range(600):
        sql("INSERT INTO afk_agent (agent_id, next_ordinal) VALUES (%s, 1)", f"aa-{i:03d}")
    queue.enqueue("zz-live", [NewTask("running now")])
    queue.enqueue("zz-failing", [NewTask("fails", max_attempts=1)])
    queue.claim("zz-live", runner="r")
    failing = queue.claim("zz-failing", runner="r")
    queue.fail(failing, "boom")
    base = pages(token="")
    overview = get(base + "/").text
    table = overview.split('<table class="agents">', 1)[1].split("</table>", 1)[0]
    ids = re.findall(r'href="/agents/([^"?]+)"', table)
    assert ids[:2] == ["zz-live", "zz-failing"], ids[:5]
    assert "of 602 agents" in overview and 'href="/agents/"' in overview
    index = get(base + "/agents/").text
    assert "602 agents" in index
    found = get(base + "/agents/?q=aa-59").text
    assert re.findall(r'href="/agents/(aa-[^"]+)"', found) == [f"aa-{i}" for i in range(590, 600)]
    page2 = get(base + "/agents/?after=aa-099").text
    first = re.findall(r'href="/agents/(aa-[^"]+)"', page2)[0]
    assert first == "aa-100"


def test_an_agent_page_has_a_total_and_a_previous_page(pages, queue):
    import re

    queue.enqueue("big", [NewTask(f"item {i}") for i in range(120)])
    base = pages(token="")
    page3 = get(base + "/agents/big?after=100").text
    assert "120 tasks" in page3 and "item 100" in page3
    prev = re.search(r'href="([^"]+)" rel="prev"', page3)
    assert prev, page3[-800:]
    page2 = get(base + prev.group(1).replace("&amp;", "&")).text
    assert "#51 to #100 shown" in page2
    prev = re.search(r'href="([^"]+)" rel="prev"', page2)
    page1 = get(base + prev.group(1).replace("&amp;", "&")).text
    assert "#1 to #50 shown" in page1 and 'rel="prev"' not in page1
