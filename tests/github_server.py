"""A small GitHub-compatible issues API on 127.0.0.1, for the tracker tests.

Implements what the client uses: list issues (state, labels, per_page, page, ``Link``
pagination, pull requests mixed in), get one, create, comment, with token checks. Tests
script failures per route (a 403 secondary rate limit with ``Retry-After``, 5xx, 422)
and read every request the server received.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse


@dataclass
class Scripted:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: str


class FakeGitHub:
    def __init__(self, repo: str = "acme/xla", token: str = "t0ken-for-tests") -> None:
        self.repo = repo
        self.token = token
        self.issues: dict[int, dict[str, Any]] = {}
        self.comments: dict[int, list[str]] = {}
        self.received: list[Received] = []
        self.script: dict[tuple[str, str], list[Scripted]] = {}
        self.next_number = 1
        self.lock = threading.Lock()
        self.url = ""

    def add_issue(
        self,
        title: str,
        body: str = "",
        state: str = "open",
        labels: tuple[str, ...] = ("device-matrix",),
        pull_request: bool = False,
    ) -> int:
        with self.lock:
            n = self.next_number
            self.next_number += 1
            issue = {
                "number": n,
                "title": title,
                "body": body,
                "state": state,
                "labels": [{"name": x} for x in labels],
                "html_url": f"https://github.com/{self.repo}/issues/{n}",
            }
            if pull_request:
                issue["pull_request"] = {"url": "x"}
            self.issues[n] = issue
            return n

    def fail_next(self, method: str, route: str, *responses: Scripted) -> None:
        """Answer the next requests to ``route`` ("issues", "issue", "comments") like this."""
        self.script.setdefault((method, route), []).extend(responses)

    def writes(self) -> list[Received]:
        return [r for r in self.received if r.method != "GET"]


def _handler(gh: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _route(self) -> tuple[str, int | None]:
            path = urlparse(self.path).path
            base = f"/repos/{gh.repo}/issues"
            if path == base:
                return "issues", None
            m = re.fullmatch(re.escape(base) + r"/(\d+)", path)
            if m:
                return "issue", int(m.group(1))
            m = re.fullmatch(re.escape(base) + r"/(\d+)/comments", path)
            if m:
                return "comments", int(m.group(1))
            return "unknown", None

        def _handle(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length).decode() if length else ""
            gh.received.append(Received(method, self.path, dict(self.headers.items()), raw))
            route, number = self._route()
            scripted = gh.script.get((method, route))
            if scripted:
                s = scripted.pop(0)
                self._send(s.status, s.body, s.headers)
                return
            if self.headers.get("Authorization") != f"Bearer {gh.token}":
                self._send(401, {"message": "Bad credentials"})
                return
            if route == "unknown":
                self._send(404, {"message": "Not Found"})
                return
            if method == "GET" and route == "issues":
                q = parse_qs(urlparse(self.path).query)
                state = q.get("state", ["open"])[0]
                label = q.get("labels", [None])[0]
                per_page = int(q.get("per_page", ["30"])[0])
                page = int(q.get("page", ["1"])[0])
                items = [
                    i
                    for i in sorted(gh.issues.values(), key=lambda i: i["number"])
                    if (state == "all" or i["state"] == state)
                    and (label is None or any(lbl["name"] == label for lbl in i["labels"]))
                ]
                chunk = items[(page - 1) * per_page : page * per_page]
                headers = {}
                if page * per_page < len(items):
                    nxt = f"{gh.url}/repos/{gh.repo}/issues?state={state}&per_page={per_page}&page={page + 1}"
                    if label:
                        nxt += f"&labels={label}"
                    headers["Link"] = f'<{nxt}>; rel="next", <{gh.url}/repos/{gh.repo}/issues?page=1>; rel="first"'
                self._send(200, chunk, headers)
            elif method == "GET" and route == "issue":
                issue = gh.issues.get(number or -1)
                self._send(200, issue) if issue else self._send(404, {"message": "Not Found"})
            elif method == "POST" and route == "issues":
                data = json.loads(raw or "{}")
                if not data.get("title"):
                    self._send(
                        422,
                        {
                            "message": "Validation Failed",
                            "errors": [{"resource": "Issue", "field": "title", "code": "missing_field"}],
                        },
                    )
                    return
                n = gh.add_issue(data["title"], data.get("body", ""), labels=tuple(data.get("labels", [])))
                self._send(201, gh.issues[n])
            elif method == "POST" and route == "comments":
                if (number or -1) not in gh.issues:
                    self._send(404, {"message": "Not Found"})
                    return
                gh.comments.setdefault(number or -1, []).append(json.loads(raw)["body"])
                self._send(201, {"id": len(gh.comments[number or -1])})
            else:
                self._send(405, {"message": "Method Not Allowed"})

        def do_GET(self) -> None:
            self._handle("GET")

        def do_POST(self) -> None:
            self._handle("POST")

    return Handler


@contextmanager
def serve(repo: str = "acme/xla", token: str = "t0ken-for-tests") -> Iterator[FakeGitHub]:
    gh = FakeGitHub(repo, token)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(gh))
    gh.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield gh
    finally:
        server.shutdown()
        server.server_close()
