"""The open disable issues (#33), read once per run from the tracker.

- the ledger (local, trusted): its open ``DISABLED`` issues, read only (no ledger is made),
  on every run (nothing is cached: the ledger is always at hand);
- GitHub: one search on the title prefix, conditional on the ETag of the last one (kept
  in the cache, so an unchanged list costs no rate limit); an issue counts only when its
  author may write to the repository (admin, maintain, write) or is the tracker's own
  user. Any other, and one whose title or body cannot be read, is answered once with a
  comment saying why it was not applied and what was read, and is never applied.

GitHub's list is kept in ``.device-matrix/disables.json`` with the time it was read: when
the tracker cannot be reached (down, rate-limited, no token) the list read last is used,
and :attr:`Read.note` says how old it is: a run never fails for it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from device_matrix.config import Config, make_state_dir
from device_matrix.errors import DeviceMatrixError
from device_matrix.issues.base import Issue, Tracker, neutralize
from device_matrix.issues.ledger import Ledger, read_issues
from device_matrix.output import one_line
from device_matrix.records.atomic import write_json_atomic
from device_matrix.records.schema import DisablesRef, UnmatchedDisable
from device_matrix.skips.model import DeviceSkip, device_names
from device_matrix.skips.tracker import CACHE_FILE, LIST_FILE, TITLE_PREFIX, Disable, Unreadable, parse

if TYPE_CHECKING:
    from device_matrix.issues.client import Page
    from device_matrix.issues.github import GitHubTracker

# #42: every file a row's folder holds of the tracker's disables, removed together when the
# row applies none (a list left behind still skips a closed issue's test in plain pytest)
ROW_FILES = (CACHE_FILE, LIST_FILE)
ENV_TRACKER = "DEVICE_MATRIX_TRACKER"
# a run's read of the tracker before its rows start: seconds per request, and in all for a
# rate limit (a sync waits up to 600 s; a run uses the cached list instead)
RUN_READ_TIMEOUT = 10.0
RUN_READ_MAX_WAIT = 30.0
ANSWER_MARKER = "<!-- device-matrix:disable-answer -->"
RowDevice = tuple[str, "str | None"]  # a row's name and its PJRT device: what a disable's devices name
WRITERS = frozenset({"admin", "maintain", "write"})


@dataclass
class Read:
    """What one read of the tracker gave, or the cached list when it could not be read."""

    disables: list[Disable]
    read_at: dt.datetime
    fresh: bool  # read from the tracker now, not from the cache
    note: str
    unreadable: list[Unreadable] = field(default_factory=list)
    refused: list[tuple[Disable, str]] = field(default_factory=list)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0)


def _date(text: object, fallback: dt.date) -> dt.date:
    if isinstance(text, str) and text:
        try:
            return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).date()
        except ValueError:
            pass
    return fallback


def _load_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def age_text(delta: dt.timedelta) -> str:
    seconds = max(0, int(delta.total_seconds()))
    if seconds < 3600:
        return f"{seconds // 60} min"
    if seconds < 172800:
        return f"{seconds // 3600} h"
    return f"{seconds // 86400} days"


# --- the ledger -------------------------------------------------------------------------


def ledger_disables(
    ledger: Path, today: dt.date, seed: Path | None = None
) -> tuple[list[Disable], list[tuple[Issue, Unreadable]]]:
    """The ledger's open ``DISABLED`` issues, read only: the seed file's, which every clone
    has (its states win), and those filed in the ledger; no ledger file: the seed's alone (#42)."""
    found: list[Disable] = []
    bad: list[tuple[Issue, Unreadable]] = []
    for kept in read_issues(seed, ledger):
        issue = kept.issue
        if issue.state != "open":
            continue
        got = parse(issue.key, issue.title, issue.body, _date(kept.created, today))
        if isinstance(got, Disable):
            found.append(got)
        elif isinstance(got, Unreadable):
            bad.append((issue, got))
    return found, bad


# --- GitHub -----------------------------------------------------------------------------


def github(tracker: Tracker) -> GitHubTracker:
    """The tracker that is not the ledger: GitHub's (the two backends of :func:`open_tracker`)."""
    return cast("GitHubTracker", tracker)


def _page_json(page: Page) -> list[Any]:
    return [page.data, page.url, page.next_url]


def _page_of(raw: Any) -> Page | None:
    from device_matrix.issues.client import Page

    if isinstance(raw, list) and len(raw) == 3 and isinstance(raw[1], str):
        return Page(raw[0], raw[1], raw[2] if isinstance(raw[2], str) else None)
    return None


class GitHubDisables:
    """The search, the permission checks and the answers, over a :class:`GitHubTracker`."""

    def __init__(self, tracker: GitHubTracker, cache: dict[str, Any]) -> None:
        self.tracker = tracker
        self.client = tracker.client
        self.permissions: dict[str, str] = dict(cache.get("permissions") or {})
        self.answered: set[str] = set(cache.get("answered") or [])
        for url, kept in (cache.get("etags") or {}).items():
            page = _page_of(kept[1:]) if isinstance(kept, list) and kept else None
            if page is not None and isinstance(kept[0], str):
                self.client.etags[url] = (kept[0], page)

    def etags_json(self) -> dict[str, list[Any]]:
        return {url: [tag, *_page_json(page)] for url, (tag, page) in self.client.etags.items()}

    def _may_write(self, login: str | None) -> tuple[bool, str]:
        if login is None:
            return False, "its author could not be read"
        if login == self.client.login():
            return True, "the tracker's own user"
        if login not in self.permissions:
            from device_matrix.issues.client import GoneError

            try:
                data = self.client.get(f"/repos/{self.tracker.repository}/collaborators/{login}/permission").data
                level = data.get("permission") if isinstance(data, dict) else None
                self.permissions[login] = str(level or "none")
            except GoneError:
                self.permissions[login] = "none"  # not a collaborator at all
        level = self.permissions[login]
        if level == "none":
            return False, f"@{login} has no permission on the repository"
        return level in WRITERS, f"@{login} has {level} permission"

    def read(self, today: dt.date) -> tuple[list[Disable], list[tuple[Disable, str]], list[tuple[Issue, Unreadable]]]:
        from device_matrix.issues.client import PER_PAGE, author

        repo = self.tracker.repository
        params = {"q": f'repo:{repo} is:issue is:open in:title "{TITLE_PREFIX}"', "per_page": PER_PAGE}
        found: list[Disable] = []
        refused: list[tuple[Disable, str]] = []
        bad: list[tuple[Issue, Unreadable]] = []
        for items in self.client.pages("/search/issues", params):
            for item in items:
                if "pull_request" in item:
                    continue
                issue = self.tracker._issue(item)
                if issue.state != "open":
                    continue
                login = author(item)
                got = parse(f"#{issue.number}", issue.title, issue.body, _date(item.get("created_at"), today), login)
                if isinstance(got, Unreadable):
                    bad.append((issue, got))
                elif isinstance(got, Disable):
                    ok, why = self._may_write(login)
                    if ok:
                        found.append(got)
                    else:
                        refused.append((got, why))
        return found, refused, bad


def _parsed_text(d: Disable) -> str:
    where = ", ".join(d.devices) if d.devices != ("*",) else "every row"
    shape = f" (unittest's form: {d.unittest_module}.{d.test.replace('::', '.')})" if d.unittest_module else ""
    return f"test `{d.test}`{shape} on {where}"


def answer(tracker: Tracker, issue: Issue, text: str, answered: set[str]) -> bool:
    """Comment ``text`` on ``issue`` once: never again once answered (kept, or found among
    the tracker's own comments). False when the comment could not be written."""
    if issue.key in answered:
        return True
    try:
        if any(ANSWER_MARKER in c for c in tracker.comments(issue)):
            answered.add(issue.key)
            return True
        tracker.comment(issue, f"{text}\n\n{ANSWER_MARKER}")
    except DeviceMatrixError:
        return False  # asked again on the next run
    answered.add(issue.key)
    return True


def read_disables(
    open_tracker: Callable[[], Tracker],
    cache_dir: Path,
    *,
    ledger: Path | None = None,
    seed: Path | None = None,
    answering: bool = True,
    now: Callable[[], dt.datetime] = _now,
) -> Read:
    """The open disables: from the tracker (one query), else from the cache, with its age.

    ``ledger``: the tracker is the ledger at that path, read directly (a run makes no
    ledger); it is opened only to answer an issue that cannot be read. ``answering``: the
    issues not applied are answered (off in a workflow's row jobs, whose token is read-only:
    the issues job's sync answers them)."""
    path = cache_dir / CACHE_FILE
    cache = _load_cache(path)
    started = now()
    try:
        answered: set[str] = set(cache.get("answered") or [])
        extra: dict[str, Any] = {}
        refused: list[tuple[Disable, str]] = []
        name = "ledger"
        if ledger is not None:
            found, bad = ledger_disables(ledger, started.date(), seed)
            if answering and any(issue.key not in answered for issue, _ in bad):
                tracker = open_tracker()
        else:
            tracker = open_tracker()
            name = tracker.name
            gh = GitHubDisables(github(tracker), cache)
            found, refused, bad = gh.read(started.date())
            answered |= gh.answered
            for d, why in refused if answering else ():
                issue = Issue(f"{gh.tracker.repository}#{d.issue[1:]}", int(d.issue[1:]), d.title, "", "open")
                answer(
                    tracker,
                    issue,
                    f"device-matrix did not apply this disable: {why}; only issues by someone with write "
                    f"permission to the repository disable a test. It read: {_parsed_text(d)}.",
                    answered,
                )
            extra = {"etags": gh.etags_json(), "permissions": gh.permissions}
        for issue, problem in bad:
            if issue.key in answered or not answering:
                continue
            answer(
                tracker,
                issue,
                f"device-matrix could not read this disable, so it is not applied: {problem.problem}.",
                answered,
            )
    except DeviceMatrixError as exc:
        return _cached(cache, started, f"the tracker could not be read ({exc.message})")
    if ledger is not None:
        # the ledger is local: read on every run, nothing to keep for when it is unreachable,
        # and a project whose ledger holds no disables gets no file written (#33)
        return Read(found, started, True, f"{len(found)} disable(s) read from the ledger tracker", [b for _, b in bad])
    data = {
        "read_at": started.isoformat(),
        "tracker": name,
        "disables": [d.as_json() for d in found],
        "answered": sorted(answered),
        **extra,
    }
    try:
        make_state_dir(cache_dir)  # #42: made here, it ignores itself as the history's does
        write_json_atomic(path, data)
    except OSError:
        pass  # the list still applies to this run; the next run reads the tracker again
    return Read(
        found,
        started,
        True,
        f"{len(found)} disable(s) read from the {name} tracker",
        [b for _, b in bad],
        refused,
    )


def _cached(cache: dict[str, Any], now: dt.datetime, why: str) -> Read:
    raw = cache.get("disables")
    read_at = cache.get("read_at")
    if not isinstance(raw, list) or not isinstance(read_at, str):
        return Read([], now, False, f"{why}; no list read before: no tracker disables apply")
    try:
        at = dt.datetime.fromisoformat(read_at)
        disables = [Disable.from_json(d) for d in raw if isinstance(d, dict)]
    except (KeyError, ValueError):
        return Read([], now, False, f"{why}; the cached list cannot be read: no tracker disables apply")
    return Read(
        disables,
        at,
        False,
        f"{why}; using the list read {age_text(now - at)} ago ({at.isoformat()}, {len(disables)} disable(s))",
    )


def merged_disable_list(project_list: Path, disables: Sequence[Disable], script_files: Sequence[str]) -> str:
    """The project's disable list with the tracker's appended: one file the child reads."""
    from device_matrix.skips.tracker import disable_list_toml

    own = project_list.read_text(encoding="utf-8") if project_list.is_file() else ""
    return own.rstrip("\n") + ("\n\n" if own.strip() else "") + disable_list_toml(disables, script_files)


_READ: dict[Path, Read] = {}  # one read per process: every row of one run applies the same list
_NOTED: set[Path] = set()


def ledger_path(cfg: Config) -> Path | None:
    """Where the ledger's disables are read, when the tracker is the ledger: the project's,
    whatever the results folder is (#42)."""
    from device_matrix.issues.home import ledger_file

    return ledger_file(cfg) if cfg.tracker.kind == "ledger" else None


def seed_path(cfg: Config) -> Path:
    """The ledger's seed file, which every clone has: its disables apply with the ledger's."""
    return cfg.project_root / cfg.tracker.ledger_seed


def open_tracker(cfg: Config, results: Path) -> Tracker:
    from device_matrix.issues import open_tracker as opener

    return opener(cfg, results)


def tracker_config(cfg: Config, environ: Mapping[str, str]) -> Config:
    """The tracker a run reads its disables from: the configuration's, or in the workflow's
    row jobs the one its ``tracker`` input names (``DEVICE_MATRIX_TRACKER``), in the
    repository the job runs for when the configuration names none."""
    import dataclasses

    raw = environ.get(ENV_TRACKER) or cfg.tracker.kind
    kind: Literal["ledger", "github"] = "github" if raw == "github" else "ledger"
    repository = cfg.tracker.repository if "/" in cfg.tracker.repository else environ.get("GITHUB_REPOSITORY", "")
    if kind == cfg.tracker.kind and repository == cfg.tracker.repository:
        return cfg
    return dataclasses.replace(cfg, tracker=dataclasses.replace(cfg.tracker, kind=kind, repository=repository))


def _for_a_run(tracker: Tracker) -> Tracker:
    """A run waits little for GitHub before its rows start: the cached list serves otherwise."""
    if not isinstance(tracker, Ledger):
        github(tracker).client.timeout = RUN_READ_TIMEOUT
        github(tracker).client.max_wait = RUN_READ_MAX_WAIT
    return tracker


def hold(cfg: Config, applied: Sequence[Disable]) -> None:
    """The disables this process's runs apply, instead of the tracker's (the re-enable check
    runs the disabled tests: none of them is skipped by its own disable)."""
    _READ[cfg.state_dir] = Read(list(applied), _now(), True, "held for the re-enable check")


def _answering() -> bool:
    """A workflow's row job's token is read-only: its issues job answers (``issues sync``)."""
    return os.environ.get("GITHUB_ACTIONS") != "true"


@dataclass(frozen=True)
class RowDisables:
    """#41: the tracker's open disables on a row (#42: only those that apply to it), as a run
    of the row read them before anything starts:
    the run's plan holds them; its first step writes them into the row's folder (:func:`apply`)."""

    disables: tuple[Disable, ...]
    read_at: dt.datetime
    fresh: bool
    note: str
    text: str  # the row's list: the project's and the tracker's


def read_for_row(
    cfg: Config, row: RowDevice, script_files: Sequence[str], note: Callable[[str], None]
) -> RowDisables | None:
    """The tracker's open disables a run of the row applies (read once per process); None:
    there are none, the row's children read the project's list alone."""
    cache_dir = cfg.state_dir
    got = _READ.get(cache_dir)
    if got is None:
        tracked = tracker_config(cfg, os.environ)
        got = _READ[cache_dir] = read_disables(
            lambda: _for_a_run(open_tracker(tracked, tracked.results_dir)),
            cache_dir,
            ledger=ledger_path(tracked),
            seed=seed_path(tracked),
            answering=_answering(),
        )
        if _answering():
            answer_unmatched(lambda: _for_a_run(open_tracker(tracked, tracked.results_dir)), rowless(cfg, got.disables))
    if not got.fresh and cache_dir not in _NOTED:
        _NOTED.add(cache_dir)  # said once per run, not once per row
        note(one_line(f"disables: {got.note}"))  # a tracker's error text, on one line (#42)
    if not got.disables:
        return None
    mine = tuple(d for d in got.disables if d.applies(*row))
    return RowDisables(
        disables=mine,
        read_at=got.read_at,
        fresh=got.fresh,
        note=got.note,
        text=merged_disable_list(cfg.disable_list, mine, script_files),
    )


def apply(cfg: Config, row_dir: Path, got: RowDisables | None) -> tuple[Path, DisablesRef | None]:
    """The disable list the row's children read: the project's, or, with open disable
    issues on the row, the project's and the tracker's in ``row_dir`` (with ``disables.json``,
    what was read and when); and what the run's record says of the tracker's list (None: there
    was none open)."""
    if got is None:
        _remove_row_files(row_dir)
        return cfg.disable_list, None
    # #33: the record says how old the list was when the run applied it, as disables.json does
    ref = DisablesRef(
        read_at=got.read_at.isoformat(),
        age_s=int((_now() - got.read_at).total_seconds()),
        fresh=got.fresh,
        applied=len(got.disables),
        note=got.note,
    )
    if not got.disables:
        # #42: only other rows' disables are open: the record says the list was read, and
        # the row has no file of them (its children, and plain pytest, read the project's)
        _remove_row_files(row_dir)
        return cfg.disable_list, ref
    write_json_atomic(row_dir / CACHE_FILE, {**ref, "disables": [d.as_json() for d in got.disables]})
    path = row_dir / LIST_FILE
    path.write_text(got.text, encoding="utf-8")
    return path, ref


def _remove_row_files(row_dir: Path) -> None:
    for name in ROW_FILES:
        (row_dir / name).unlink(missing_ok=True)  # the last run's, of disables since closed


def settle(
    cfg: Config,
    row: str,
    row_dir: Path,
    script_files: Sequence[str],
    *,
    got: RowDisables,
    ref: DisablesRef,
    nodeids: Collection[str],
) -> DisablesRef:
    """#42: once a run of the whole row has collected its tests, the tracker's disables on
    the row (``got``, as the run's plan read them) that name none of them (a renamed test, a
    look-alike character in the title): said in the record and in ``disables.json``, not
    counted as applied, each answered once."""
    missed = [d for d in got.disables if not any(d.matches(n, script_files) for n in nodeids)]
    problem = f"matches no test of row {row}"
    settled: DisablesRef = {
        **ref,
        "applied": len(got.disables) - len(missed),
        "unmatched": [UnmatchedDisable(issue=d.issue, test=d.test, problem=problem) for d in missed],
    }
    if got.disables:  # a row none of whose disables apply has no disables.json (#42)
        write_json_atomic(row_dir / CACHE_FILE, {**settled, "disables": [d.as_json() for d in got.disables]})
    if missed and _answering():
        tracked = tracker_config(cfg, os.environ)
        answer_unmatched(lambda: _for_a_run(open_tracker(tracked, tracked.results_dir)), settled["unmatched"])
    return settled


def known_devices(cfg: Config) -> list[str]:
    """The names a disable's devices may use: the project's rows and their devices."""
    return sorted(set().union(*(device_names(r.name, r.pjrt_device) for r in cfg.rows.values())))


def rowless(cfg: Config, found: Sequence[Disable]) -> list[UnmatchedDisable]:
    """#42: the disables whose devices name no row of the project nor a row's device
    (``devices: cdua``): read, and applied nowhere."""
    known = known_devices(cfg)
    return [
        UnmatchedDisable(
            issue=d.issue,
            test=d.test,
            problem=f"is disabled on {', '.join(d.devices)}: no row of this project nor its device "
            f"has that name ({', '.join(known)})",
        )
        for d in found
        if "*" not in d.devices and not set(d.devices) & set(known)
    ]


def _looks_alike(test: str) -> str:
    odd = [f"{c!r} (U+{ord(c):04X})" for c in dict.fromkeys(test) if not c.isascii()]
    return (
        f"; its name holds characters outside ASCII, which may only look like the ones meant: {', '.join(odd)}"
        if odd
        else ""
    )


def answer_unmatched(open_: Callable[[], Tracker], entries: Sequence[UnmatchedDisable]) -> int:
    """Answer each disable issue that names no test of a row, once (a hidden marker says
    so): what was read and where it matched nothing. The number not answered (the tracker
    could not be written, or read): asked again on the next run or sync."""
    grouped: dict[str, list[UnmatchedDisable]] = {}
    for e in entries:
        grouped.setdefault(e["issue"], []).append(e)
    if not grouped:
        return 0
    try:
        tracker = open_()
    except DeviceMatrixError:
        return len(grouped)
    missed = 0
    for ref, found in grouped.items():
        issue = cited_issue(tracker, ref)
        test = found[0]["test"]
        text = (
            f"device-matrix applies this disable to no test: `{test}` "
            f"{'; '.join(e['problem'] for e in found)}{_looks_alike(test)}. Edit the issue: its title "
            "spells a test's nodeid as `pytest --collect-only -q` lists it (a test renamed since, or a "
            "look-alike character, names none), its `devices:` line names rows or their devices."
        )
        missed += issue is None or not answer(tracker, issue, neutralize(text), set())
    return missed


# --- filing and closing (``issues disable`` / ``issues enable``) ------------------------


def open_disable_issues(tracker: Tracker, title: str) -> list[Issue]:
    """The open issues titled exactly ``title`` (a disable's), on either tracker."""
    if isinstance(tracker, Ledger):
        return [i for i in tracker.list_issues() if i.state == "open" and i.title.strip() == title]
    from device_matrix.issues.client import PER_PAGE

    gh = github(tracker)
    client, repo = gh.client, gh.repository
    params = {"q": f'repo:{repo} is:issue is:open in:title "{title}"', "per_page": PER_PAGE}
    out: list[Issue] = []
    for items in client.pages("/search/issues", params):
        for item in items:
            if "pull_request" not in item:
                issue = gh._issue(item)
                if issue.state == "open" and issue.title.strip() == title:
                    out.append(issue)
    return out


def close_issue(tracker: Tracker, issue: Issue) -> None:
    """Close ``issue`` as done (the test runs again)."""
    if isinstance(tracker, Ledger):
        tracker.set_state(issue.key, "closed")
        return
    gh = github(tracker)
    gh.client.request("PATCH", f"/repos/{gh.repository}/issues/{issue.number}", json={"state": "closed"})


def answer_all(cfg: Config, tracker: Tracker) -> Read:
    """``issues sync``: the open disables read with ``tracker`` and every one not applied
    answered (the workflow's issues job holds the token that may comment)."""
    ledger = tracker.path if isinstance(tracker, Ledger) else None
    return read_disables(lambda: tracker, cfg.state_dir, ledger=ledger, seed=seed_path(cfg))


def declared(cfg: Config, script_files: Sequence[str]) -> tuple[list[DeviceSkip], str]:
    """The tracker's disables as declarations beside the ones in code (``skips list|check``),
    an unreadable one with its problem, and how the list was read (from the tracker, or the
    cache and its age)."""
    got = read_disables(
        lambda: open_tracker(cfg, cfg.results_dir), cfg.state_dir, ledger=ledger_path(cfg), seed=seed_path(cfg)
    )
    out: list[DeviceSkip] = []
    for d in got.disables:
        for target in d.targets(script_files):
            out.append(
                DeviceSkip(
                    mode="skip",
                    devices=d.devices,
                    issue=d.issue,
                    reason=d.skip_reason,
                    source="tracker",
                    since=d.since,
                    test=target,
                    file=f"tracker {d.issue}",
                    form="disabled",
                )
            )
    for u in got.unreadable:
        out.append(
            DeviceSkip(
                mode="skip",
                devices=(),
                issue=u.issue,
                reason=u.title,
                source="tracker",
                file=f"tracker {u.issue}",
                form="disabled",
                problem=f"not applied: {u.problem}",
            )
        )
    return out, got.note


# --- the re-enable check's evidence, on each issue (``issues sync``) --------------------

RERUN_MARKER = "<!-- device-matrix:rerun={} -->"


def _number(ref: str) -> int | None:
    tail = ref.rpartition(":")[2] if ref.startswith("ledger:") else ref.rpartition("#")[2]
    return int(tail) if tail.isdigit() else None


def _key(tracker: Tracker, ref: str, number: int) -> str:
    """A disable's ``ledger:N`` or ``#N`` as the tracker's issue key."""
    return ref if ref.startswith("ledger:") else f"{github(tracker).repository}#{number}"


def cited_issue(tracker: Tracker, ref: str) -> Issue | None:
    """The open issue a disable's reference names, to comment on; None for one it cannot name."""
    number = _number(ref)
    return None if number is None else Issue(_key(tracker, ref, number), number, "", "", "open")


def _evidence_text(entries: Sequence[dict[str, Any]], times: int, closing: bool) -> str:
    runs = sum(int(e["runs"]) for e in entries)
    passes = sum(int(e["passes"]) for e in entries)
    lines = [
        f"Re-enable check: {passes} of {runs} run(s) passed "
        f"({times} run(s) asked of each row: a 5% flake fails within 45 runs with 90% confidence)."
    ]
    for e in entries:
        lines.append(f"- row `{e['row']}`: {e['passes']} of {e['runs']} passed")
        if e["failures"]:
            last = e["failures"][-1]
            lines.append(f"  - {len(e['failures'])} failing run(s); the latest, run {last['run']}:")
            for t in last["tests"]:
                where = f" (fingerprint `{t['fingerprint']}`)" if t.get("fingerprint") else ""
                lines.append(f"    - `{t['nodeid']}` {t['outcome']}{where}: {neutralize(str(t.get('message', '')))}")
    if closing:
        lines.append("\nEvery run passed: closed, the test runs again on its rows from the next run.")
    elif runs:
        lines.append("\nStill failing: the disable stays.")
    return "\n".join(lines)


def report_reruns(tracker: Tracker, evidence: dict[str, Any], *, apply: bool) -> list[str]:
    """Comment each disable issue's evidence once per rerun; close those that passed every run."""
    rerun = str(evidence.get("rerun", ""))
    times = int(evidence.get("times", 0))
    grouped: dict[str, list[dict[str, Any]]] = {}
    for e in evidence.get("disables") or []:
        if isinstance(e, dict) and isinstance(e.get("issue"), str):
            grouped.setdefault(e["issue"], []).append(e)
    cited = tracker.lookup(list(grouped)) if grouped else {}
    lines: list[str] = []
    for ref, entries in grouped.items():
        number = _number(ref)
        state = cited.get(ref)
        if number is None or state is None or state.state != "open":
            lines.append(f"  {ref}: {state.state if state else 'unknown'}, not reported")
            continue
        issue = Issue(_key(tracker, ref, number), number, state.title, "", "open", url=state.url)
        marker = RERUN_MARKER.format(rerun)
        if any(marker in c for c in tracker.comments(issue)):
            lines.append(f"  {ref}: this re-enable check is already reported")
            continue
        runs = sum(int(e["runs"]) for e in entries)
        closing = runs > 0 and all(int(e["passes"]) == int(e["runs"]) for e in entries)
        verb = ("closes" if closing else "keeps") if apply else ("would close" if closing else "would keep")
        lines.append(f"  {ref}: {sum(int(e['passes']) for e in entries)} of {runs} passed: {verb} it")
        if apply:
            tracker.comment(issue, f"{_evidence_text(entries, times, closing)}\n\n{marker}")
            if closing:
                close_issue(tracker, issue)
    return lines
