"""A small GitHub-compatible API on 127.0.0.1, for the tracker tests.

Implements what the client uses: list issues (state, labels, sort, direction, per_page,
page, ``Link`` pagination, pull requests mixed in), get one (any repository; 404, 410 for
a deleted one), create, comment, list comments (paginated, each with its id and author),
edit and delete a comment (the pull request comment of verdicts), reopen (PATCH), search by
body text or by title (``in:title``, ``is:open``: the disable issues' search), a user's
permission on the repository (``/collaborators/{user}/permission``, from ``permissions``),
the token's own user (``/user``, refused as to an app's token when asked), and a
GraphQL endpoint for batched ``issueOrPullRequest`` lookups, with token checks: a read-only
token (a fork's pull request's) reads and is refused every write (403); a comment is edited
by its author only, unless the token may edit anyone's (a maintainer's). Every read has
an ``ETag`` and is answered 304 when ``If-None-Match`` names it.

Faults are scripted per route: an answer (403/429 with or without rate-limit headers,
5xx, 422, an HTML body, a 201 without ``number``), optionally after doing the real work
(a create that answers 502), a reset connection, a slow answer past the client's
timeout; pagination links that point at the same page or at another host; and hooks that
run before a request is served (another sync filing meanwhile). Every request received
is recorded.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse


@dataclass
class Scripted:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    apply: bool = False  # do the real work first, then answer like this
    reset: bool = False  # close the connection without an answer
    delay: float = 0.0  # seconds before answering (past the client's timeout)
    raw: bytes | None = None  # a body that is not JSON
    content_type: str = "application/json"


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
        self.readonly_token = "read-0nly-t0ken"
        self.login = "github-actions[bot]"  # the author of what the token writes
        self.user_refused = False  # GET /user answers 403, as to an app's token (Actions')
        self.may_edit_any = False  # the token may edit anyone's comment (a maintainer's)
        self.not_modified = 0  # GETs answered 304 (If-None-Match named the answer's ETag)
        self.repos: dict[str, dict[int, dict[str, Any]]] = {repo: {}}
        self.deleted: set[tuple[str, int]] = set()
        self.comment_list: list[dict[str, Any]] = []  # {"id", "issue", "body", "user"}
        self.received: list[Received] = []
        self.script: dict[tuple[str, str], list[Scripted]] = {}
        self.hooks: list[Callable[[str, str], None]] = []
        self.link_mode: str | None = None  # "self": next = this page; "foreign": next on another host
        self.foreign_url = "http://attacker.invalid:8080"
        self.lock = threading.RLock()
        self.url = ""
        # login -> permission on the repository (admin, maintain, write, triage, read); absent: 404
        self.permissions: dict[str, str] = {}

    @property
    def issues(self) -> dict[int, dict[str, Any]]:
        return self.repos[self.repo]

    def add_issue(
        self,
        title: str,
        body: str = "",
        state: str = "open",
        labels: tuple[str, ...] = ("device-matrix",),
        pull_request: bool = False,
        *,
        repo: str | None = None,
        locked: bool = False,
        author: str | None = None,
        created_at: str = "2026-11-02T09:00:00Z",
    ) -> int:
        name = repo or self.repo
        with self.lock:
            issues = self.repos.setdefault(name, {})
            n = max([0, *issues, *(k for r, k in self.deleted if r == name)]) + 1
            issue: dict[str, Any] = {
                "number": n,
                "title": title,
                "body": body,
                "state": state,
                "locked": locked,
                "labels": [{"name": x} for x in labels],
                "html_url": f"https://github.com/{name}/issues/{n}",
                "user": {"login": author or self.login},
                "created_at": created_at,
            }
            if pull_request:
                issue["pull_request"] = {"url": "x"}
            issues[n] = issue
            return n

    @property
    def comments(self) -> dict[int, list[str]]:
        """Each issue's comment bodies, oldest first."""
        out: dict[int, list[str]] = {}
        for c in self.comment_list:
            out.setdefault(c["issue"], []).append(c["body"])
        return out

    def add_comment(self, issue: int, body: str, *, login: str | None = None, kind: str = "Bot") -> int:
        with self.lock:
            number = max((c["id"] for c in self.comment_list), default=0) + 1
            self.comment_list.append(
                {"id": number, "issue": issue, "body": body, "user": {"login": login or self.login, "type": kind}}
            )
            return number

    def fail_next(self, method: str, route: str, *responses: Scripted) -> None:
        """Answer the next requests to ``route`` (issues, issue, comments, comment, search,
        graphql) so."""
        self.script.setdefault((method, route), []).extend(responses)

    def writes(self) -> list[Received]:
        return [r for r in self.received if r.method != "GET" and not r.path.startswith("/graphql")]

    def filed(self) -> list[dict[str, Any]]:
        """Issues created through the API (not pull requests)."""
        return [i for i in self.issues.values() if "pull_request" not in i]


def _handler(gh: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            data = b"" if status == 204 else json.dumps(body).encode()  # 204: no content
            self._send_raw(status, data, "application/json", headers)

        def _send_raw(self, status: int, data: bytes, ctype: str, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _route(self) -> tuple[str, str, int | None]:
            path = urlparse(self.path).path
            if path == "/graphql":
                return "graphql", "", None
            if path == "/search/issues":
                return "search", "", None
            if path == "/user":
                return "user", "", None
            m = re.fullmatch(r"/repos/([\w.-]+/[\w.-]+)/collaborators/([^/]+)/permission", path)
            if m:
                return "permission", m.group(1), None
            m = re.fullmatch(r"/repos/([\w.-]+/[\w.-]+)/issues/comments/(\d+)", path)
            if m:
                return "comment", m.group(1), int(m.group(2))
            m = re.fullmatch(r"/repos/([\w.-]+/[\w.-]+)/issues(?:/(\d+))?(/comments)?", path)
            if not m:
                return "unknown", "", None
            repo, num, comments = m.group(1), m.group(2), m.group(3)
            if num is None:
                return "issues", repo, None
            return ("comments" if comments else "issue"), repo, int(num)

        def _handle(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length).decode() if length else ""
            with gh.lock:
                gh.received.append(Received(method, self.path, dict(self.headers.items()), raw))
            route, repo, number = self._route()
            for hook in list(gh.hooks):
                hook(method, route)
            scripted = gh.script.get((method, route))
            if scripted:
                s = scripted.pop(0)
                if s.apply:
                    self._serve(method, route, repo, number, raw, answer=False)
                if s.delay:
                    time.sleep(s.delay)
                if s.reset:
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if s.raw is not None:
                    self._send_raw(s.status, s.raw, s.content_type, s.headers)
                else:
                    self._send(s.status, s.body, s.headers)
                return
            auth = self.headers.get("Authorization")
            if auth == f"Bearer {gh.readonly_token}" and method != "GET" and route != "graphql":
                self._send(403, {"message": "Resource not accessible by integration"})
                return
            if auth not in (f"Bearer {gh.token}", f"Bearer {gh.readonly_token}"):
                self._send(401, {"message": "Bad credentials"})
                return
            self._serve(method, route, repo, number, raw, answer=True)

        def _serve(self, method: str, route: str, repo: str, number: int | None, raw: str, *, answer: bool) -> None:
            status, body, headers = self._work(method, route, repo, number, raw)
            if not answer:
                return
            if method == "GET" and status == 200:
                # as GitHub: every read has an ETag, and a 304 when the client names it
                tag = '"' + hashlib.sha256(json.dumps([body, headers]).encode()).hexdigest()[:32] + '"'
                headers = {**headers, "ETag": tag}
                if self.headers.get("If-None-Match") == tag:
                    with gh.lock:
                        gh.not_modified += 1
                    self._send_raw(304, b"", "application/json", headers)
                    return
            self._send(status, body, headers)

        def _work(
            self, method: str, route: str, repo: str, number: int | None, raw: str
        ) -> tuple[int, Any, dict[str, str]]:
            q = parse_qs(urlparse(self.path).query)
            with gh.lock:
                issues = gh.repos.get(repo, {})
                if method == "GET" and route == "issues":
                    return self._list(repo, issues, q)
                if method == "GET" and route == "issue":
                    if (repo, number) in gh.deleted:
                        return 410, {"message": "This issue was deleted"}, {}
                    issue = issues.get(number or -1)
                    return (200, issue, {}) if issue else (404, {"message": "Not Found"}, {})
                if method == "PATCH" and route == "issue":
                    issue = issues.get(number or -1)
                    if not issue:
                        return 404, {"message": "Not Found"}, {}
                    issue.update(
                        {
                            k: v
                            for k, v in json.loads(raw or "{}").items()
                            if k in ("state", "title", "body", "state_reason")
                        }
                    )
                    return 200, issue, {}
                if method == "POST" and route == "issues":
                    data = json.loads(raw or "{}")
                    if not data.get("title"):
                        return (
                            422,
                            {
                                "message": "Validation Failed",
                                "errors": [{"resource": "Issue", "field": "title", "code": "missing_field"}],
                            },
                            {},
                        )
                    n = gh.add_issue(data["title"], data.get("body", ""), labels=tuple(data.get("labels", [])))
                    return 201, gh.issues[n], {}
                if route == "comments" and repo == gh.repo:
                    if (number or -1) not in gh.issues:
                        return 404, {"message": "Not Found"}, {}
                    if method == "GET":
                        return self._comments(number or -1, q)
                    if method == "POST":
                        made = gh.add_comment(number or -1, json.loads(raw)["body"])
                        return 201, self._comment_json(made), {}
                if route == "comment" and repo == gh.repo:
                    found = [c for c in gh.comment_list if c["id"] == number]
                    if not found:
                        return 404, {"message": "Not Found"}, {}
                    if method == "GET":
                        return 200, self._comment_json(found[0]["id"]), {}
                    if found[0]["user"]["login"] != gh.login and not gh.may_edit_any:
                        return 403, {"message": "Resource not accessible by integration"}, {}
                    if method == "PATCH":
                        found[0]["body"] = json.loads(raw or "{}").get("body", found[0]["body"])
                        return 200, self._comment_json(found[0]["id"]), {}
                    if method == "DELETE":
                        gh.comment_list.remove(found[0])
                        return 204, None, {}
                if method == "GET" and route == "user":
                    if gh.user_refused:
                        return 403, {"message": "Resource not accessible by integration"}, {}
                    return 200, {"login": gh.login, "type": "Bot" if gh.login.endswith("[bot]") else "User"}, {}
                if method == "GET" and route == "permission" and repo == gh.repo:
                    login = urlparse(self.path).path.split("/")[-2]
                    if login not in gh.permissions:
                        return 404, {"message": f"{login} is not a user"}, {}
                    level = gh.permissions[login]
                    return 200, {"permission": level, "role_name": level, "user": {"login": login}}, {}
                if method == "GET" and route == "search":
                    return self._search(q)
                if method == "POST" and route == "graphql":
                    return self._graphql(json.loads(raw or "{}").get("query", ""))
            if route == "unknown" or repo not in gh.repos:
                return 404, {"message": "Not Found"}, {}
            return 405, {"message": "Method Not Allowed"}, {}

        def _list(
            self, repo: str, issues: dict[int, dict[str, Any]], q: dict[str, list[str]]
        ) -> tuple[int, Any, dict[str, str]]:
            state = q.get("state", ["open"])[0]
            label = q.get("labels", [None])[0]
            per_page = int(q.get("per_page", ["30"])[0])
            page = int(q.get("page", ["1"])[0])
            items = [
                i
                for i in sorted(issues.values(), key=lambda i: i["number"])
                if (state == "all" or i["state"] == state)
                and (label is None or any(lbl["name"] == label for lbl in i["labels"]))
            ]
            if q.get("direction", ["desc" if q.get("sort") else "asc"])[0] == "desc" and q.get("sort"):
                items.reverse()
            chunk = items[(page - 1) * per_page : page * per_page]
            headers = {}
            base = gh.url
            if gh.link_mode == "foreign":
                base = gh.foreign_url
            if page * per_page < len(items) or gh.link_mode:
                query = {k: v[0] for k, v in q.items()}
                query["page"] = str(page if gh.link_mode == "self" else page + 1)
                nxt = f"{base}/repos/{repo}/issues?" + "&".join(f"{k}={v}" for k, v in query.items())
                headers["Link"] = f'<{nxt}>; rel="next", <{gh.url}/repos/{repo}/issues?page=1>; rel="first"'
            return 200, chunk, headers

        def _comment_json(self, number: int) -> dict[str, Any]:
            (c,) = [c for c in gh.comment_list if c["id"] == number]
            return {
                "id": c["id"],
                "body": c["body"],
                "user": c["user"],
                "html_url": f"https://github.com/{gh.repo}/issues/{c['issue']}#issuecomment-{c['id']}",
            }

        def _comments(self, issue: int, q: dict[str, list[str]]) -> tuple[int, Any, dict[str, str]]:
            per_page = int(q.get("per_page", ["30"])[0])
            page = int(q.get("page", ["1"])[0])
            items = [self._comment_json(c["id"]) for c in gh.comment_list if c["issue"] == issue]
            headers = {}
            if page * per_page < len(items):
                nxt = f"{gh.url}/repos/{gh.repo}/issues/{issue}/comments?per_page={per_page}&page={page + 1}"
                headers["Link"] = f'<{nxt}>; rel="next"'
            return 200, items[(page - 1) * per_page : page * per_page], headers

        def _search(self, q: dict[str, list[str]]) -> tuple[int, Any, dict[str, str]]:
            text = q.get("q", [""])[0]
            repo_m = re.search(r"repo:(\S+)", text)
            terms = re.findall(r'"([^"]+)"', text)
            field = "title" if "in:title" in text else "body"
            items = [
                i
                for i in gh.repos.get(repo_m.group(1) if repo_m else "", {}).values()
                if "pull_request" not in i
                and any(t in (i[field] or "") for t in terms)
                and ("is:open" not in text or i["state"] == "open")
            ]
            return 200, {"total_count": len(items), "incomplete_results": False, "items": items}, {}

        def _graphql(self, query: str) -> tuple[int, Any, dict[str, str]]:
            data: dict[str, Any] = {}
            errors = []
            for alias, owner, name, num in re.findall(
                r'(r\d+): repository\(owner: "([^"]*)", name: "([^"]*)"\) \{ i: issueOrPullRequest\(number: (\d+)\)',
                query,
            ):
                repo = f"{owner}/{name}"
                if repo not in gh.repos:
                    data[alias] = None
                    errors.append({"type": "NOT_FOUND", "path": [alias], "message": "no repository"})
                    continue
                issue = gh.repos[repo].get(int(num))
                if issue is None:
                    data[alias] = {"i": None}
                    errors.append({"type": "NOT_FOUND", "path": [alias, "i"], "message": "no issue"})
                    continue
                data[alias] = {
                    "i": {
                        "state": issue["state"].upper(),
                        "locked": issue["locked"],
                        "title": issue["title"],
                        "url": issue["html_url"],
                    }
                }
            return 200, {"data": data, **({"errors": errors} if errors else {})}, {}

        def do_GET(self) -> None:
            self._handle("GET")

        def do_POST(self) -> None:
            self._handle("POST")

        def do_PATCH(self) -> None:
            self._handle("PATCH")

        def do_DELETE(self) -> None:
            self._handle("DELETE")

    return Handler


@contextmanager
def serve(repo: str = "acme/xla", token: str = "t0ken-for-tests") -> Iterator[FakeGitHub]:
    gh = FakeGitHub(repo, token)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(gh))
    server.daemon_threads = True
    gh.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield gh
    finally:
        server.shutdown()
        server.server_close()
