"""The status pages: "what are my agents doing right now?", in a browser.

Served by the watchdog service on the same HTTP server as ``/metrics``:

- ``/``: one row per agent (its backlog as a bar, what it is running, what is
  stuck), and the last day's failures grouped by error as in the digest;
- ``/agents/<id>``: the agent's backlog in ordinal order, keyset-paged,
  filtered by state;
- ``/tasks/<id>``: spec, checkpoint, result, side effects, the history as a
  timeline, the resume brief and the ``afk retry`` command.

Read only: nothing here changes anything. Agent-written text is escaped by
Jinja2's autoescape, with bidi controls isolated (``<bdi>``); the
Content-Security-Policy allows no script at all, and no secret is ever
passed to a template.

Access: open on a loopback address. On any other address the pages answer
403 unless ``AFK_WEB_TOKEN`` is set and presented (``Authorization: Bearer
…``, or the cookie that a ``?token=…`` link sets once). ``/metrics`` and
``/healthz`` are not affected.
"""

from __future__ import annotations

import contextvars
import hmac
import ipaddress
import json
import logging
import re
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from . import workspaces
from .agents.accounts import Accounts
from .agents.approvals import shell_command
from .config import DigestSettings
from .db import Database
from .errors import AfkError, TaskNotFound
from .states import STATES
from .text import json_visible, shown, terminal

logger = logging.getLogger(__name__)

#: agents on the overview; tasks per agent page
AGENTS_SHOWN = 500
RUNNING_SHOWN = 2000
PAGE_SIZE = 50
#: how often the overview reloads itself (a meta refresh: no script)
REFRESH_SECONDS = 15
COOKIE = "afk_web_token"
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
_AGENT_PATH = re.compile(r"^/agents/(?P<agent>[^/]+)$")
_TASK_PATH = re.compile(r"^/tasks/(?P<task>[^/]+)$")
#: a signed link that decides one approval request (watchdog.links)
_LINK_PATH = re.compile(r"^/a/(?P<token>[A-Za-z0-9_.-]{1,512})$")
#: the most of a link's form read (a note)
MAX_FORM = 16 * 1024
#: a signed-in person's session (issue 43 item 6): the cookie, and how long it lasts
SESSION_COOKIE = "afk_session"
SESSION_SECONDS = 12 * 3600


class SlowedSignIns:
    """Failed sign-ins are slowed, never locked out (issue 50 item 6): each
    failure of an address (and every tenth failure of all of them, for a
    proxy that gives every client one address) waits longer before its
    answer, up to :data:`MOST_WAIT` s; an address with no failure for
    :data:`FORGOTTEN_AFTER` s starts again. A right token is never slowed."""

    FREE = 3
    MOST_WAIT = 5.0
    FORGOTTEN_AFTER = 900.0
    #: failed sign-ins waiting at once, at most: one more is answered 429 at
    #: once (a flood of them must not hold a thread each for seconds)
    MOST_WAITING = 16

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[int, float]] = {}
        self._waiting = 0

    def wait(self, address: str) -> bool:
        """Count a failure of ``address`` and wait what it must; False (and
        no wait) when too many failures wait already."""
        seconds = self.failed(address)
        if not seconds:
            return True
        with self._lock:
            if self._waiting >= self.MOST_WAITING:
                return False
            self._waiting += 1
        try:
            time.sleep(seconds)
        finally:
            with self._lock:
                self._waiting -= 1
        return True

    def failed(self, address: str) -> float:
        """Count a failure of ``address``; the seconds its answer waits."""
        now = time.monotonic()
        with self._lock:
            for key, (_, last) in list(self._seen.items()):
                if now - last > self.FORGOTTEN_AFTER:
                    del self._seen[key]
            if len(self._seen) > 10_000:  # (bounded: the oldest go)
                self._seen.pop(next(iter(self._seen)))
            mine = self._seen.get(address, (0, now))[0] + 1
            every = self._seen.get("*", (0, now))[0] + 1
            self._seen[address] = (mine, now)
            self._seen["*"] = (every, now)
        n = max(mine, every // 10) - self.FREE
        return 0.0 if n <= 0 else min(0.5 * 2 ** (n - 1), self.MOST_WAIT)


#: a task's Cancel, asked once more (GET: the question; POST: the action)
_CANCEL_PATH = re.compile(r"^/tasks/(?P<task>[^/]+)/cancel$")
#: the person signed in for the request being answered (None: no one)
_SIGNED: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "afk_web_signed", default=None
)
#: the actions of a signed-in person, each a POST with the session's CSRF token
_ACTION_PATH = re.compile(
    r"^/(?:tasks/(?P<task>[^/]+)/(?P<task_action>retry|cancel|answer)"
    r"|approvals/(?P<approval>[0-9]{1,18})/(?P<decision>approve|deny)"
    r"|accounts/(?P<account>[^/]+)/(?P<account_action>clear))$"
)

StartResponse = Callable[..., Any]


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Response:
    def __init__(
        self,
        status: str,
        body: str | bytes,
        content_type: str = "text/html",
        headers: list[tuple[str, str]] | None = None,
    ) -> None:
        self.status = status
        self.body = body.encode() if isinstance(body, str) else body
        self.headers = [
            ("Content-Type", f"{content_type}; charset=utf-8"),
            ("Content-Security-Policy", CSP),
            ("X-Content-Type-Options", "nosniff"),
            ("Referrer-Policy", "no-referrer"),
            ("Cache-Control", "no-store"),
            *(headers or []),
        ]


class StatusPages:
    """A WSGI app of the status pages on ``db``."""

    def __init__(
        self,
        db: Database,
        digest_settings: DigestSettings,
        *,
        token: str = "",
        host: str = "127.0.0.1",
        require_token: bool = False,
        public_url: str = "",
        fleet_lost_seconds: float = 60.0,
    ) -> None:
        import jinja2

        from .digest import question_hint, template_dirs

        self.db = db
        self.digest_settings = digest_settings
        self.token = token
        self.public_url = public_url
        self.fleet_lost_seconds = fleet_lost_seconds
        # loopback alone is open, unless a reverse proxy may reach it
        # (require_token): then, as on any other address, the token is needed
        self.open = not token and is_loopback(host) and not require_token
        self.refused = not token and not self.open
        self._read_key: bytes | None = None
        self.failed_signins = SlowedSignIns()
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(
                [str(Path(d) / "web") for d in template_dirs(digest_settings)]
            ),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        self.env.filters.update(
            ago=ago,
            duration=duration,
            when=when,
            pretty=pretty,
            call_json=call_json,
            visible=terminal,
            clean=shown,
            headtail=headtail,
            urlpart=urlpart,
            agent_url=agent_url,
        )
        self.env.globals["question_hint"] = question_hint

    # -- WSGI ---------------------------------------------------------------

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        try:
            response = self.respond(environ)
        except AfkError as exc:  # the database is down: say so, in one line
            logger.warning("status page %s: %s", environ.get("PATH_INFO"), exc)
            response = Response(
                "503 Service Unavailable",
                self.page("error.html.j2", title="Unavailable", message=str(exc)),
            )
        except Exception:  # never a traceback in a browser
            logger.exception("status page %s failed", environ.get("PATH_INFO"))
            response = Response(
                "500 Internal Server Error",
                self.page(
                    "error.html.j2", title="Error", message="the page failed; see the service's log"
                ),
            )
        start_response(response.status, response.headers)
        return [response.body]

    def respond(self, environ: dict[str, Any]) -> Response:
        _SIGNED.set(None)  # (a thread answers many requests: none is signed in yet)
        path = environ.get("PATH_INFO") or "/"
        raw = environ.get("afk.raw_path")
        query = urllib.parse.parse_qs(environ.get("QUERY_STRING") or "")
        if path == "/static/style.css":
            css = self.env.loader.get_source(self.env, "style.css")[0]  # type: ignore[union-attr]
            return Response("200 OK", css, "text/css")
        link = _LINK_PATH.match(path)
        if link is not None:  # (the signed link is its own credential)
            return self.decide_by_link(environ, link.group("token"))
        denied = self.check_access(environ, path, query, raw)
        if denied is not None:
            return denied
        _SIGNED.set(self.session(environ))
        if path == "/login":
            return self.sign_in(environ)
        if path == "/logout":
            return self.sign_out(environ)
        confirm = _CANCEL_PATH.match(path)
        if confirm is not None and environ.get("REQUEST_METHOD", "GET") in ("GET", "HEAD"):
            return self.confirm_cancel(confirm.group("task"))
        action = _ACTION_PATH.match(path)
        if action is not None:
            return self.act(environ, action)
        if environ.get("REQUEST_METHOD", "GET") not in ("GET", "HEAD"):
            return Response(
                "405 Method Not Allowed", "read only\n", "text/plain", [("Allow", "GET, HEAD")]
            )
        if path == "/":
            return Response("200 OK", self.overview())
        if path == "/fleet":
            return Response("200 OK", self.fleet(_SIGNED.get()))
        if path == "/agents/" and first(query, "id") is None:
            return self.agents(first(query, "q"), first(query, "after"))
        agent = agent_of(path, raw, query)
        if agent is not None:
            if not agent or "\x00" in agent:
                return self.not_found("no such agent")
            return self.agent(agent, first(query, "state"), first(query, "after"))
        match = _TASK_PATH.match(path)
        if match:
            return self.task(match.group("task"), _SIGNED.get())
        return self.not_found("no such page")

    def check_access(
        self, environ: dict[str, Any], path: str, query: dict[str, list[str]], raw: str | None
    ) -> Response | None:
        if self.open:
            return None
        if self.refused:
            return Response(
                "403 Forbidden",
                self.page(
                    "error.html.j2",
                    title="Forbidden",
                    message="the status pages are served on a non-loopback address only with "
                    "AFK_WEB_TOKEN set",
                ),
            )
        given = first(query, "token")
        if given is not None and self.matches(given):
            # set once from a ?token= link, then the link without it
            rest = {k: v for k, v in query.items() if k != "token"}
            location = local_path(raw if raw is not None else path)
            location += "?" + urllib.parse.urlencode(rest, doseq=True) if rest else ""
            # a reading session of its own (issue 50 item 6): never the token
            secure = "; Secure" if self.over_tls(environ) else ""
            cookie = (
                f"{COOKIE}={self.read_session(time.time() + SESSION_SECONDS)}; HttpOnly; "
                f"SameSite=Strict; Path=/; Max-Age={SESSION_SECONDS}{secure}"
            )
            return Response(
                "303 See Other", "", "text/plain", [("Location", location), ("Set-Cookie", cookie)]
            )
        header = environ.get("HTTP_AUTHORIZATION", "")
        if header.startswith("Bearer ") and self.matches(header[7:].strip()):
            return None
        for part in environ.get("HTTP_COOKIE", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == COOKIE and self.reads(value):
                return None
        return Response(
            "403 Forbidden",
            self.page(
                "error.html.j2",
                title="Forbidden",
                message="present the token: an Authorization: Bearer header, or open a ?token= "
                "link once",
            ),
        )

    def matches(self, given: str) -> bool:
        return hmac.compare_digest(given.encode(), self.token.encode())

    def read_session(self, until: float) -> str:
        """A reading session's cookie value, good until ``until``: signed with
        the server's secret and bound to AFK_WEB_TOKEN (a new token ends every
        session of the old one); it holds neither."""
        return f"{int(until)}.{self._read_mac(int(until))}"

    def reads(self, value: str) -> bool:
        """Whether a cookie is a reading session this server made, still good."""
        until, _, mac = value.partition(".")
        if not until.isdigit() or len(until) > 12 or not mac:
            return False
        good = hmac.compare_digest(mac.encode(), self._read_mac(int(until)).encode())
        return good and int(until) > time.time()

    def _read_mac(self, until: int) -> str:
        import hashlib

        from . import delivery

        if self._read_key is None:  # (read once: the same for every replica, for good)
            secret = delivery.link_secret(self.db, "web-read").encode()
            # (bound to the token: a new AFK_WEB_TOKEN ends the old sessions)
            self._read_key = hmac.new(secret, self.token.encode(), hashlib.sha256).digest()
        return hmac.new(self._read_key, f"read:{until}".encode(), hashlib.sha256).hexdigest()

    def page(self, template: str, **values: Any) -> str:
        """A page, its header naming the person signed in (or "read only")."""
        given = {"refresh": None, "who": None, "signed": _SIGNED.get(), **values}
        return self.env.get_template(template).render(**given)

    def bad_request(self, message: str) -> Response:
        return Response(
            "400 Bad Request", self.page("error.html.j2", title="Bad request", message=message)
        )

    def not_found(self, message: str) -> Response:
        return Response(
            "404 Not Found", self.page("error.html.j2", title="Not found", message=message)
        )

    # -- a decision by a signed link (issue 43) ---------------------------------

    def decide_by_link(self, environ: dict[str, Any], token: str) -> Response:
        """GET shows the request (its call in full) and one button; POST
        decides it. An altered, foreign, expired or used link gets a plain
        page that says so, and nothing changes."""
        import time

        from . import delivery, links
        from .errors import NotRunning
        from .queue import Queue

        method = environ.get("REQUEST_METHOD", "GET")
        if method not in ("GET", "HEAD", "POST"):
            return Response(
                "405 Method Not Allowed", "GET or POST\n", "text/plain", [("Allow", "GET, POST")]
            )
        found = links.verify(delivery.link_secret(self.db), token, time.time())
        if isinstance(found, str):
            status = "410 Gone" if "expired" in found else "403 Forbidden"
            return self.link_page(status, title="Refused", message=found)
        if found.decision == "answer":
            return self.answer_by_link(environ, method, found.item, token)
        row = self.db.one("approval_page", {"approval": found.item})
        if row is None:
            return self.link_page("404 Not Found", title="Gone", message="no such request")
        if row["decision"] is not None:
            return self.link_page(
                "409 Conflict",
                title="Already decided",
                message=f"this request was {row['decision']} (by "
                f"{row['decided_by'] or 'someone'}, via {row['decided_via']}); nothing was changed",
            )
        approve = found.decision == "approve"
        if method == "POST":
            note = _form(environ).get("note", "").strip() or None
            try:
                Queue(self.db).decide(
                    found.item, approve, who="the link's holder", via="link", note=note
                )
            except NotRunning as exc:
                return self.link_page("409 Conflict", title="Already decided", message=str(exc))
            verb = "Approved" if approve else "Denied"
            return self.link_page(
                "200 OK",
                title=verb,
                message=f"{verb}: {row['title']} is due again, and its session goes on.",
            )
        return Response(
            "200 OK",
            self.page(
                "approval.html.j2",
                title=("Approve" if approve else "Deny") + f" request {row['id']}",
                r=row,
                approve=approve,
                call=shell_command(row["tool_input"]),
                action=f"/a/{token}",
            ),
        )

    # -- a signed-in person's actions (issue 43 item 6) ---------------------------

    def session(self, environ: dict[str, Any]) -> dict[str, Any] | None:
        """The signed-in person of a request (name, csrf), or None (read once
        a request, by respond: the pages and actions read _SIGNED)."""
        digest = _session_hash(environ)
        row = self.db.one("web_session", {"session": digest}) if digest else None
        return dict(row) if row is not None else None

    def sign_in(self, environ: dict[str, Any]) -> Response:
        """GET: the sign-in form; POST: a token from `afk web token` makes a
        session (its cookie HttpOnly, SameSite=Strict, Secure over TLS)."""
        import hashlib
        import secrets

        method = environ.get("REQUEST_METHOD", "GET")
        if method in ("GET", "HEAD"):
            return Response("200 OK", self.page("login.html.j2", title="sign in", failed=False))
        if method != "POST":
            return Response(
                "405 Method Not Allowed", "GET or POST\n", "text/plain", [("Allow", "GET, POST")]
            )
        token = _form(environ).get("token", "").strip()
        session, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(24)
        row = self.db.one(
            "web_sign_in",
            {
                "hash": hashlib.sha256(token.encode()).hexdigest(),
                "session": hashlib.sha256(session.encode()).hexdigest(),
                "csrf": csrf,
                "ttl": SESSION_SECONDS,
            },
        )
        if not token or row is None:
            if not self.failed_signins.wait(environ.get("REMOTE_ADDR") or "?"):
                return Response(
                    "429 Too Many Requests", "too many failed sign-ins: wait\n", "text/plain"
                )
            return Response(
                "401 Unauthorized", self.page("login.html.j2", title="sign in", failed=True)
            )
        secure = "; Secure" if self.over_tls(environ) else ""
        cookie = (
            f"{SESSION_COOKIE}={session}; HttpOnly; SameSite=Strict; Path=/; "
            f"Max-Age={SESSION_SECONDS}{secure}"
        )
        return Response(
            "303 See Other", "", "text/plain", [("Location", "/"), ("Set-Cookie", cookie)]
        )

    def sign_out(self, environ: dict[str, Any]) -> Response:
        """POST (with the session's CSRF token): the session ends, here and
        in the database, and its cookie goes."""
        if environ.get("REQUEST_METHOD") != "POST":
            return Response(
                "405 Method Not Allowed", "POST only\n", "text/plain", [("Allow", "POST")]
            )
        who = _SIGNED.get()
        form = _form(environ)
        if who is not None and hmac.compare_digest(
            form.get("csrf", "").encode(), str(who["csrf"]).encode()
        ):
            self.db.execute("web_sign_out", {"session": _session_hash(environ)})
        gone = f"{SESSION_COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"
        return Response(
            "303 See Other", "", "text/plain", [("Location", "/"), ("Set-Cookie", gone)]
        )

    def confirm_cancel(self, task: str) -> Response:
        """Cancel asks once more (issue 50 item 7): this page's form does it."""
        try:
            task_id = uuid.UUID(task)
        except ValueError:
            return self.not_found("not a task id")
        row = self.db.one("web_task_title", {"id": task_id})
        if row is None:
            return self.not_found("no such task")
        return Response(
            "200 OK",
            self.page("cancel.html.j2", title=f"cancel: {row['title']}", task=row),
        )

    def over_tls(self, environ: dict[str, Any]) -> bool:
        """Whether the person reaches the pages over TLS (directly, or through
        a proxy whose public address is https)."""
        return environ.get("wsgi.url_scheme") == "https" or self.public_url.startswith("https:")

    def act(self, environ: dict[str, Any], m: re.Match[str]) -> Response:
        """One action of a signed-in person: POST only, with the session's
        CSRF token; done in their name, then back to the page."""
        import hmac

        from .agents.accounts import Accounts
        from .errors import AfkError
        from .queue import Queue

        if environ.get("REQUEST_METHOD") != "POST":
            return Response(
                "405 Method Not Allowed", "POST only\n", "text/plain", [("Allow", "POST")]
            )
        who = _SIGNED.get()
        if who is None:
            return Response(
                "401 Unauthorized",
                self.page("error.html.j2", title="Sign in", message="sign in first: /login"),
            )
        form = _form(environ)
        if not hmac.compare_digest(form.get("csrf", "").encode(), str(who["csrf"]).encode()):
            return Response(
                "403 Forbidden",
                self.page(
                    "error.html.j2", title="Refused", message="this form is not this session's"
                ),
            )
        queue, name, back = Queue(self.db), str(who["name"]), "/"
        try:
            if m.group("task"):
                task_id = uuid.UUID(m.group("task"))
                back = f"/tasks/{task_id}"
                verb = m.group("task_action")
                if verb == "retry":
                    queue.retry([task_id], who=name)
                elif verb == "cancel":
                    queue.cancel([task_id], who=name, reason=form.get("reason") or None)
                else:
                    queue.answer(task_id, form.get("answer", ""), who=name)
            elif m.group("approval"):
                row = queue.decide(
                    int(m.group("approval")),
                    m.group("decision") == "approve",
                    who=name,
                    via="page",
                    note=form.get("note") or None,
                )
                back = f"/tasks/{row['task_id']}"
            else:
                Accounts(self.db).clear(urllib.parse.unquote(m.group("account")), who=name)
                back = "/fleet"
        except ValueError:
            return self.not_found("not a task id")
        except AfkError as exc:
            return Response(
                "409 Conflict", self.page("error.html.j2", title="Not done", message=str(exc))
            )
        return Response("303 See Other", "", "text/plain", [("Location", back)])

    def answer_by_link(
        self, environ: dict[str, Any], method: str, question: int, token: str
    ) -> Response:
        """A question's link: GET shows it and an answer form, POST answers."""
        from .errors import NotRunning
        from .queue import Queue

        row = self.db.one("question_page", {"question": question})
        if row is None:
            return self.link_page("404 Not Found", title="Gone", message="no such question")
        if row["answered_at"] is not None:
            return self.link_page(
                "409 Conflict",
                title="Already answered",
                message=f"this question was answered (by {row['answered_by'] or 'someone'}); "
                "nothing was changed",
            )
        if method == "POST":
            answer = _form(environ).get("answer", "").strip()
            if not answer:
                return self.link_page("400 Bad Request", title="No answer", message="write one")
            try:
                Queue(self.db).answer(row["task_id"], answer, who="the link's holder")
            except NotRunning as exc:
                return self.link_page("409 Conflict", title="Already answered", message=str(exc))
            return self.link_page(
                "200 OK",
                title="Answered",
                message=f"{row['title']} is due again, with your answer.",
            )
        return Response(
            "200 OK",
            self.page(
                "answer.html.j2", title=f"answer: {row['title']}", r=row, action=f"/a/{token}"
            ),
        )

    def link_page(self, status: str, *, title: str, message: str) -> Response:
        """A signed link's answer: styled as what it says (done, or not)."""
        kind = "ok" if status.startswith("2") else "error"
        return Response(status, self.page("error.html.j2", title=title, message=message, kind=kind))

    # -- pages --------------------------------------------------------------

    def overview(self) -> str:
        from .digest import build

        rows = self.db.all("web_overview", {"limit": AGENTS_SHOWN, "running_limit": RUNNING_SHOWN})
        now = rows[0]["now"] if rows else datetime.now(UTC)
        day = build(
            self.db,
            now - timedelta(days=1),
            now,
            self.digest_settings,
            UTC,
            count_done=False,
            review=False,
            lost_after=self.fleet_lost_seconds,
        )
        finished = {r["agent_id"]: r for r in day.per_agent}
        agents = []
        for r in rows:
            running = r["running"]
            # the live backlog, and the last day's failures (not its finishes:
            # counting those would cost what the day did, not what is live)
            failed = int(finished.get(r["agent_id"], {}).get("failed", 0))
            counts = {
                "todo": r["waiting"] - r["paused"],
                "paused": r["paused"],
                "running": len(running),
                "failed": failed,
            }
            late = (
                r["first_waiting_at"] is not None
                and (now - r["first_waiting_at"]).total_seconds()
                > self.digest_settings.todo_late_after
            )
            agents.append(
                {
                    "id": r["agent_id"],
                    "enqueued": r["enqueued"],
                    "counts": counts,
                    "bar": bar(counts),
                    "running": running,
                    "first_waiting_at": r["first_waiting_at"],
                    "late": late,
                }
            )
        stuck = {"expired": day.expired, "paused": day.paused, "late": day.oldest_todo}
        return self.page(
            "overview.html.j2",
            title="afk-watchdog",
            parked=Accounts(self.db).parked(),
            agents=agents,
            day=day,
            stuck=stuck,
            now=now,
            refresh=REFRESH_SECONDS,
            truncated=len(rows) >= AGENTS_SHOWN,
            total=rows[0]["total"] if rows else 0,
            paused_after=self.digest_settings.paused_after,
        )

    def fleet(self, who: dict[str, Any] | None = None) -> str:
        """Every loop registered (alive or lost), its task and profile, the
        accounts parked, and the tasks no live loop can take."""
        from .agents.accounts import Accounts
        from .agents.fleet import Fleet

        fleet = Fleet(self.db, self.fleet_lost_seconds)
        return self.page(
            "fleet.html.j2",
            title="fleet",
            loops=fleet.loops(),
            parked=Accounts(self.db).parked(),
            stuck=fleet.waiting_for_a_loop(),
            refresh=REFRESH_SECONDS,
            who=who,
        )

    def agents(self, q: str | None, after: str | None) -> Response:
        """The index of every agent, by name, searchable."""
        for value in (q, after):
            if value is not None and ("\x00" in value or len(value) > 10_000):
                return self.bad_request("a search or a cursor must be text without a NUL")
        rows, more = one_page(
            self.db.all("web_agents", {"q": q or None, "after": after or "", "limit": PAGE_SIZE})
        )
        return Response(
            "200 OK",
            self.page(
                "agents.html.j2",
                title="agents",
                agents=rows,
                q=q or "",
                total=rows[0]["total"] if rows else 0,
                after=after,
                next_after=rows[-1]["agent_id"] if more and rows else None,
            ),
        )

    def agent(self, agent_id: str, state: str | None, after: str | None) -> Response:
        if state is not None and state not in STATES:
            return self.bad_request(f"no state {state!r}: one of {', '.join(STATES)}")
        if after and not (after.isascii() and after.isdigit() and len(after) < 12):
            return self.bad_request("after must be an ordinal (a whole number)")
        after_ordinal = int(after) if after else 0
        rows = self.db.all(
            "web_agent_tasks",
            {"agent_id": agent_id, "after": after_ordinal, "state": state, "limit": PAGE_SIZE},
        )
        rows, more = one_page(rows)
        return Response(
            "200 OK",
            self.page(
                "agent.html.j2",
                title=f"agent {shown(agent_id)}",
                agent=agent_id,
                tasks=rows,
                state=state,
                states=STATES,
                after=after_ordinal,
                next_after=rows[-1]["ordinal"] if more and rows else None,
                prev_after=rows[0]["prev_after"] if rows else None,
                total=rows[0]["total"] if rows else 0,
            ),
        )

    def task(self, raw_id: str, who: dict[str, Any] | None = None) -> Response:
        from .agents.brief import resume_brief
        from .queue import Queue

        try:
            task_id = uuid.UUID(raw_id)
        except ValueError:
            return self.not_found("not a task id")
        queue = Queue(self.db)
        try:
            task, history = queue.show(task_id)
        except TaskNotFound:
            return self.not_found(f"no task {task_id}")
        return Response(
            "200 OK",
            self.page(
                "task.html.j2",
                title=f"task {shown(task.title)}",
                task=task,
                history=history,
                runs=queue.runs(task_id),
                trace_url=self.digest_settings.trace_url,
                workspace=workspaces.view(queue.db, task.id, task.workspace),
                questions=queue.task_questions(task_id),
                effects=queue.effects(task_id),
                after=queue.waits_for(task_id),
                brief=resume_brief(queue, str(task_id)),
                who=who,
                approvals=self.db.all("task_approvals", {"id": task_id}),
            ),
        )


def add_login(db: Database, name: str) -> str:
    """A new login token for ``name`` (`afk web token`): shown once, kept
    as its SHA-256 only."""
    import hashlib
    import secrets

    from .checks import check_name

    name = check_name("name", name)
    token = "afk_" + secrets.token_urlsafe(32)
    db.one("web_login_add", {"name": name, "hash": hashlib.sha256(token.encode()).hexdigest()})
    return token


# -- helpers for the templates ---------------------------------------------


def _form(environ: dict[str, Any]) -> dict[str, str]:
    """A form's fields, read up to :data:`MAX_FORM` bytes."""
    try:
        size = min(int(environ.get("CONTENT_LENGTH") or 0), MAX_FORM)
    except ValueError:
        size = 0
    body = environ["wsgi.input"].read(size) if size > 0 else b""
    fields = urllib.parse.parse_qs(body.decode("utf-8", "replace"))
    return {k: v[0] for k, v in fields.items() if v}


def one_page(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], bool]:
    """A page of rows fetched one longer than a page: the page, and whether
    there is a next one."""
    return rows[:PAGE_SIZE], len(rows) > PAGE_SIZE


def urlpart(value: Any) -> str:
    """A path segment: an agent id with a slash or a space stays one segment."""
    return urllib.parse.quote(str(value), safe="")


def agent_url(agent: Any, **params: Any) -> str:
    """The page of an agent: /agents/ID, its id one quoted segment (a "/" in
    it stays inside); "." and ".." (which a browser would resolve away) as
    /agents/?id=ID. ``params`` become the query (None ones are left out)."""
    value = str(agent)
    query = {k: v for k, v in params.items() if v is not None and v != ""}
    if value in (".", ".."):
        return "/agents/?" + urllib.parse.urlencode({"id": value, **query})
    return f"/agents/{urlpart(value)}" + ("?" + urllib.parse.urlencode(query) if query else "")


def agent_of(path: str, raw: str | None, query: dict[str, list[str]]) -> str | None:
    """The agent id a request names, or None when it names none. The id is
    read from the path as sent (percent-decoded once, as UTF-8), so that a
    "/" or a "%" in it, or a non-ASCII letter, is kept as it was."""
    if path == "/agents/":
        return first(query, "id")
    if raw is None:  # another WSGI server: its PATH_INFO, decoded as latin-1
        raw = urllib.parse.quote(path.encode("latin-1", "replace"), safe="/")
    match = _AGENT_PATH.match(raw)
    if match is None:
        return None
    try:
        return urllib.parse.unquote(match.group("agent"), errors="strict")
    except UnicodeDecodeError:
        return ""


def local_path(path: str) -> str:
    """A redirect's target built from a request path, that stays on this
    site: each character outside a plain path percent-encoded (no CR or LF
    can end the header), and one leading slash (no //host, no /\\host)."""
    if not path.isascii():
        path = path.encode("latin-1", "replace").decode("latin-1")
    quoted = urllib.parse.quote(urllib.parse.unquote(path), safe="/-._~!$&'()*+,;=:@")
    return "/" + quoted.lstrip("/")


def first(query: dict[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[0] if values else None


def bar(counts: dict[str, int], width: int = 200) -> list[dict[str, Any]]:
    """Segments of a stacked bar (x, width in px), one per non-empty state."""
    total = sum(counts.values())
    out, x = [], 0.0
    for state in ("running", "todo", "paused", "failed", "done"):
        n = counts.get(state, 0)
        if n and total:
            w = max(2.0, width * n / total)
            out.append({"state": state, "n": n, "x": round(x, 1), "w": round(w, 1)})
            x += w
    return out


def headtail(text: Any, head: int = 2000, tail: int = 6000) -> str:
    """A long error's first and last lines: a traceback names its exception at
    the end."""
    value = shown(text, 10**9)
    if len(value) <= head + tail:
        return value
    return value[:head] + f"\n… {len(value) - head - tail} characters …\n" + value[-tail:]


def _session_hash(environ: dict[str, Any]) -> str | None:
    """The hash of a request's session cookie (what the database keeps), or None."""
    import hashlib

    for part in environ.get("HTTP_COOKIE", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == SESSION_COOKIE and value:
            return hashlib.sha256(value.encode()).hexdigest()
    return None


def call_json(value: Any, limit: int = 20_000) -> str:
    """A call a person approves, as JSON for a <pre>: as it is (its literal
    credentials masked when it was recorded), every control, line and bidi
    character a visible escape (issue 50 item 4: what is shown is what
    runs), cut at ``limit`` characters, saying so."""
    text = json_visible(json.dumps(value, indent=2, ensure_ascii=False, default=str))
    return text if len(text) <= limit else text[:limit] + f"\n… ({len(text) - limit} more)"


def pretty(value: Any, limit: int = 20_000) -> str:
    """JSON for a <pre>, cut at ``limit`` characters."""
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    return shown(text, limit)


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = abs(float(seconds))
    sign = "-" if seconds < 0 else ""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if s >= size:
            return f"{sign}{s / size:.0f} {unit}"
    return f"{sign}{s:.0f} s"


def ago(value: datetime | str | None, now: datetime | None = None) -> str:
    if value is None:
        return "-"
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    now = now or datetime.now(UTC)
    return duration((now - moment).total_seconds()) + " ago"


def when(value: datetime | str | None) -> str:
    if value is None:
        return "-"
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
