"""Headless Chromium, started once and driven over the DevTools protocol on a
pipe (``--remote-debugging-pipe``: JSON messages ending in a NUL byte, ours
on its fd 3, its own on fd 4), so that a test loads many pages in one
browser instead of starting one per page (about 1.5 s of CPU each).

For each page it gives the DOM after the load event, a screenshot, and
everything the page said: console calls, uncaught exceptions and the
browser's own log entries for the page (a refused script, a CSP violation).
"""

from __future__ import annotations

import base64
import json
import os
import select
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-pipe",
]


class Page:
    def __init__(self, dom: str, said: list[str]) -> None:
        self.dom = dom
        #: what the page said: console calls, exceptions, log entries
        self.said = said


class Browser:
    def __init__(self, chromium: str, profile: Path, width: int = 1100, height: int = 1400) -> None:
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # bash puts the two pipe ends on the fds the protocol names (dash
        # takes single-digit fds only)
        command = shlex.join([chromium, *FLAGS, f"--user-data-dir={profile}"])
        self._proc = subprocess.Popen(
            ["bash", "-c", f"exec {command} 3<&{to_browser_r} 4>&{from_browser_w}"],
            pass_fds=(to_browser_r, from_browser_w),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        try:
            self._attach(width, height)
        except BaseException:
            self.close()  # a browser that would not start leaves nothing behind
            raise

    def _attach(self, width: int, height: int) -> None:
        target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = self._call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log"):
            self._call(f"{domain}.enable", session=True)
        self._call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=True,
        )

    def load(self, url: str, screenshot: Path | None = None) -> Page:
        """Navigate, wait for the load event, and read the page."""
        self._events.clear()
        navigated = self._call("Page.navigate", {"url": url}, session=True)
        assert "errorText" not in navigated, navigated
        return self._loaded(screenshot)

    def _loaded(self, screenshot: Path | None = None) -> Page:
        """The page after its load event: its DOM, and what it said."""
        self._wait_event("Page.loadEventFired")
        dom = self._call(
            "Runtime.evaluate",
            {"expression": "document.documentElement.outerHTML", "returnByValue": True},
            session=True,
        )["result"]["value"]
        if screenshot is not None:
            shot = self._call("Page.captureScreenshot", {"format": "png"}, session=True)
            screenshot.write_bytes(base64.b64decode(shot["data"]))
        self._drain()
        return Page(dom, [line for e in self._events if (line := _said(e))])

    def press(self, selector: str) -> Page:
        """Press the element of ``selector`` on the loaded page (a form's
        button) as a person taps it, and read the page it loads."""
        self._events.clear()
        self._call(
            "Runtime.evaluate",
            {"expression": f"document.querySelector({json.dumps(selector)}).click()"},
            session=True,
        )
        return self._loaded()

    def resize(self, width: int, height: int = 900) -> None:
        """The viewport's size for the next loads (a phone is 390 px wide)."""
        self._call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=True,
        )

    def wrapped(self, selector: str) -> list[str]:
        """The text of each element of ``selector`` on the loaded page that the
        layout breaks over more than one line."""
        lines = (
            "el => { const r = document.createRange(); r.selectNodeContents(el);"
            " return new Set(Array.from(r.getClientRects()).map(x => Math.round(x.top))).size; }"
        )
        script = (
            f"Array.from(document.querySelectorAll({json.dumps(selector)}))"
            f".filter(el => ({lines})(el) > 1).map(el => el.textContent.trim())"
        )
        result = self._call(
            "Runtime.evaluate", {"expression": script, "returnByValue": True}, session=True
        )["result"]["value"]
        return list(result)

    def overflows(self) -> bool:
        """Whether the loaded page is wider than the viewport (a sideways scroll)."""
        result = self._call(
            "Runtime.evaluate",
            {
                "expression": "document.documentElement.scrollWidth > window.innerWidth",
                "returnByValue": True,
            },
            session=True,
        )["result"]["value"]
        return bool(result)

    def close(self) -> None:
        try:
            self._send("Browser.close", {}, None)
            self._proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self._proc.kill()
            self._proc.wait()
        finally:
            os.close(self._to_browser)
            os.close(self._from_browser)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the protocol -----------------------------------------------------

    def _send(self, method: str, params: dict[str, Any], session: str | None) -> int:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        return self._next_id

    def _call(
        self, method: str, params: dict[str, Any] | None = None, *, session: bool = False
    ) -> dict[str, Any]:
        sent = self._send(method, params or {}, self._session if session else None)
        while True:
            message = self._read(timeout=60)
            if message.get("id") == sent:
                assert "error" not in message, (method, message["error"])
                result: dict[str, Any] = message["result"]
                return result
            self._events.append(message)

    def _wait_event(self, method: str) -> None:
        if any(e.get("method") == method for e in self._events):
            return
        while True:
            message = self._read(timeout=60)
            self._events.append(message)
            if message.get("method") == method:
                return

    def _drain(self) -> None:
        """Take the events already sent (a console call made at load)."""
        while True:
            try:
                self._events.append(self._read(timeout=0.2))
            except TimeoutError:
                return

    def _read(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise AssertionError(f"Chromium exited ({self._proc.poll()})")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message


def _said(event: dict[str, Any]) -> str:
    params = event.get("params", {})
    method = event.get("method")
    if method == "Runtime.consoleAPICalled":
        args = " ".join(str(a.get("value", a.get("description", ""))) for a in params["args"])
        return f"console.{params['type']}: {args}"
    if method == "Runtime.exceptionThrown":
        details = params["exceptionDetails"]
        return f"uncaught: {details.get('exception', {}).get('description', details['text'])}"
    if method == "Log.entryAdded":
        entry = params["entry"]
        if entry.get("url", "").endswith("/favicon.ico"):
            return ""  # the browser asks for it by itself; the page names none
        return f"{entry['level']} ({entry['source']}): {entry['text']} {entry.get('url', '')}"
    return ""
