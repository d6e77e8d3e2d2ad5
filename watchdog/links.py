"""Links a person follows from a notification to decide one thing (issue 43):
``/a/TOKEN`` on the status server, where TOKEN says which item (an approval
request, or a question), which decision (approve or deny it, or answer it)
and until when, signed with the server's
own secret (HMAC-SHA256, ``afk_web_secret``). A link is bound to that one
request and that one decision; it is single-use because a request is decided
once; an altered, foreign or expired one is refused and changes nothing."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass

#: the decisions a link may carry: an approval request's, a question's
DECISIONS = ("approve", "deny", "answer")
#: the longest token read (a longer one is refused before it is parsed)
MAX_TOKEN = 512


@dataclass(frozen=True)
class Link:
    #: the approval request's id (approve, deny) or the question's (answer)
    item: int
    decision: str
    expires: int


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sign(secret: str, item: int, decision: str, expires: int) -> str:
    """The token of a link to ``decision`` ``item`` until ``expires`` (a
    Unix time)."""
    if decision not in DECISIONS:
        raise ValueError(f"no decision {decision!r}")
    body = _b64(json.dumps({"a": item, "d": decision, "x": expires}).encode())
    mac = hmac.new(secret.encode(), body.encode(), hashlib.sha256).digest()
    return f"{body}.{_b64(mac)}"


def verify(secret: str, token: str, now: float) -> Link | str:
    """The link a token is, or why it is refused (altered, expired)."""
    if len(token) > MAX_TOKEN or token.count(".") != 1:
        return "this link is not one of afk's"
    body, mac = token.split(".")
    want = hmac.new(secret.encode(), body.encode(), hashlib.sha256).digest()
    try:
        given = _unb64(mac)
        if not hmac.compare_digest(want, given):
            return "this link was altered, or is not one of this server's"
        data = json.loads(_unb64(body))
        link = Link(int(data["a"]), str(data["d"]), int(data["x"]))
    except (ValueError, KeyError, TypeError):
        return "this link is not one of afk's"
    if link.decision not in DECISIONS:
        return "this link is not one of afk's"
    if now >= link.expires:
        return "this link has expired"
    return link


# -- a run's credential for HTTP hooks --------------------------------------------

#: how a run's credential begins (a person's AFK_HOOK_TOKEN never does)
RUN_PREFIX = "afkrun."


@dataclass(frozen=True)
class RunCredential:
    """What a run's HTTP hooks act for: its task, its lease token, its account."""

    task_id: str
    token: int
    account: str


def sign_run(secret: str, task_id: str, token: int, account: str) -> str:
    """The bearer credential of one run's HTTP hooks (``AFK_HOOK_TOKEN`` in
    its environment): its task, token and account, signed with the service's
    secret of hooks. The service takes the task from it, never from the
    headers; it acts for nothing once the run's lease token is replaced."""
    body = _b64(json.dumps({"t": task_id, "k": token, "a": account}).encode())
    mac = hmac.new(secret.encode(), body.encode(), hashlib.sha256).digest()
    return f"{RUN_PREFIX}{body}.{_b64(mac)}"


def verify_run(secret: str, credential: str) -> RunCredential | None:
    """The run a credential was signed for; None for anything else."""
    if not credential.startswith(RUN_PREFIX) or len(credential) > MAX_TOKEN:
        return None
    body, _, mac = credential.removeprefix(RUN_PREFIX).partition(".")
    want = hmac.new(secret.encode(), body.encode(), hashlib.sha256).digest()
    try:
        if not hmac.compare_digest(want, _unb64(mac)):
            return None
        data = json.loads(_unb64(body))
        return RunCredential(str(data["t"]), int(data["k"]), str(data["a"]))
    except (ValueError, KeyError, TypeError):
        return None


# -- the hook port's proof (R1) ----------------------------------------------

#: the name of the service's secret (afk_web_secret) it proves itself with
#: on the hook port: `afk doctor --live` sends a challenge, the service
#: answers its HMAC, a process squatting the port cannot
HOOK_PROOF = "hook-proof"
#: the challenge's header, and the answer's
CHALLENGE_HEADER, PROOF_HEADER = "X-Afk-Challenge", "X-Afk-Proof"


def hook_proof(secret: str, challenge: str) -> str:
    """The answer to ``challenge`` of a service that holds ``secret``."""
    return hmac.new(secret.encode(), challenge.encode(), hashlib.sha256).hexdigest()
