"""A local stand-in for a MediaWiki 1.35 Action API (the iDempiere wiki), for tests and benchmarks.

It speaks the real protocol over real HTTP (stdlib `ThreadingHTTPServer` on 127.0.0.1), so the
real client runs against it unchanged. Response shapes follow the recorded responses in
`../shared/fixtures/wiki/mediawiki_api_examples/` and `MEDIAWIKI_API_NOTES.md`, in
`formatversion=2`: `categorymembers` with `cmcontinue` (`page|<hex sortkey>|<pageid>`),
`prop=revisions` and `prop=categories` for at most 50 ids or titles (`normalized`,
`redirects`, `missing: true`), `action=parse` (`text` as a string, `categories` with
`category`, errors `missingtitle` / `nosuchpageid` with HTTP 200), `meta=siteinfo`,
`list=recentchanges` and `list=logevents` with continuation.

State (`FakeWiki`) changes the way the wiki does: an edit makes a new revision and a
recentchanges row; a delete removes the page and logs `delete/delete` with the id it had; a
restore brings it back with its id; a move keeps the page id, adds a null revision, logs
`move/move` and leaves a redirect (a new page) at the old title.

Faults are injected per request (`MediaWikiServer.inject`): a `maxlag` error with
`Retry-After`, HTTP 429 with `Retry-After`, 503, a body cut off mid-JSON, an API warning — and
what a hostile server does: a gzip bomb (`gzip_bomb`, 255 KB inflating to 255 MB), an endless
chunked body (`endless`), a redirect elsewhere (`redirect` to `location`), a `continue` that
never ends (`continue_forever`, or `continue_same` repeating one token), an answer altered by
`mutate` (a revid "abc", an ns "main"). Every request is recorded (`requests`) so tests can
count them, and `bytes_sent` what each endless body wrote before the client hung up.
"""

import json
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit
from xml.sax.saxutils import escape

import pytest
from markdown_it import MarkdownIt

SHARED_WIKI_FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "wiki"


def shared_wiki_file(*parts: str) -> Path:
    """A file of the shared wiki fixtures; the calling test skips where they are absent
    (they sit beside the repository and may not be redistributed with it)."""
    path = SHARED_WIKI_FIXTURES.joinpath(*parts)
    if not path.is_file():
        pytest.skip(f"shared wiki fixtures not found at {SHARED_WIKI_FIXTURES}")
    return path


MAX_IDS = 50
_START = datetime(2026, 1, 1, tzinfo=UTC)


def _title(value: str) -> str:
    value = " ".join(value.replace("_", " ").split())
    return value[:1].upper() + value[1:]


@dataclass
class FakePage:
    """A page of the fake wiki."""

    pageid: int
    title: str
    ns: int
    html: str
    categories: list[str]
    revid: int
    timestamp: str
    wikitext: str = ""
    redirect_to: str | None = None


@dataclass
class FakeWiki:
    """The wiki's state: pages, deleted pages, recent changes and the log, with a manual clock."""

    sitename: str = "iDempiere en"
    server: str = "https://wiki.idempiere.org"
    articlepath: str = "/en/$1"
    pages: dict[int, FakePage] = field(default_factory=lambda: {})
    archive: dict[str, FakePage] = field(default_factory=lambda: {})
    recentchanges: list[dict[str, Any]] = field(default_factory=lambda: [])
    logevents: list[dict[str, Any]] = field(default_factory=lambda: [])
    seconds: int = 0
    next_pageid: int = 1000
    next_revid: int = 50000
    lock: threading.RLock = field(default_factory=threading.RLock)

    def now(self) -> str:
        """The wiki's clock (it only moves when something happens, or by `tick`)."""
        return (_START + timedelta(seconds=self.seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def tick(self, seconds: int = 1) -> None:
        """Advance the clock."""
        self.seconds += seconds

    def by_title(self, title: str) -> FakePage | None:
        """The live page with this title."""
        title = _title(title)
        return next((p for p in self.pages.values() if p.title == title), None)

    def _revision(self) -> tuple[int, str]:
        self.tick()
        self.next_revid += 1
        return self.next_revid, self.now()

    def add_page(
        self,
        title: str,
        html: str = "",
        categories: list[str] | tuple[str, ...] = (),
        *,
        ns: int = 0,
        wikitext: str = "",
        redirect_to: str | None = None,
        log: bool = True,
    ) -> FakePage:
        """Create a page (a `new` recent change)."""
        with self.lock:
            revid, timestamp = self._revision()
            self.next_pageid += 1
            page = FakePage(
                self.next_pageid,
                _title(title),
                ns,
                html or f'<div class="mw-parser-output"><p>{escape(title)}</p></div>',
                [_title(c.removeprefix("Category:")) for c in categories],
                revid,
                timestamp,
                wikitext,
                redirect_to,
            )
            self.pages[page.pageid] = page
            if log:
                self._rc("new", page)
            return page

    def add_category(self, name: str, parents: tuple[str, ...] = ()) -> FakePage:
        """A category page (namespace 14), itself in `parents`."""
        return self.add_page(f"Category:{name}", categories=parents, ns=14, log=False)

    def edit(
        self, title: str, html: str | None = None, categories: list[str] | None = None
    ) -> FakePage:
        """A new revision of a page (an `edit` recent change)."""
        with self.lock:
            page = self.by_title(title)
            assert page is not None, title
            page.revid, page.timestamp = self._revision()
            if html is not None:
                page.html = html
            if categories is not None:
                page.categories = [_title(c) for c in categories]
            self._rc("edit", page)
            return page

    def delete(self, title: str) -> FakePage:
        """Delete a page: gone from every listing; logged with the id it had."""
        with self.lock:
            page = self.by_title(title)
            assert page is not None, title
            self.tick()
            del self.pages[page.pageid]
            self.archive[page.title] = page
            self._log("delete", "delete", page, pageid=0)
            return page

    def restore(self, title: str) -> FakePage:
        """Undelete a page, with its old id and revisions."""
        with self.lock:
            page = self.archive.pop(_title(title))
            self.tick()
            self.pages[page.pageid] = page
            self._log("delete", "restore", page, pageid=page.pageid)
            return page

    def move(self, title: str, new_title: str, *, leave_redirect: bool = True) -> FakePage:
        """Rename a page: same id, a null revision, a redirect left at the old title."""
        with self.lock:
            page = self.by_title(title)
            assert page is not None, title
            old_title = page.title
            page.title = _title(new_title)
            page.revid, page.timestamp = self._revision()
            params = {"target_ns": page.ns, "target_title": page.title}
            self._log("move", "move", page, title=old_title, params=params)
            if leave_redirect:
                self.add_page(old_title, redirect_to=page.title, log=False)
            return page

    def _rc(self, kind: str, page: FakePage) -> None:
        self.recentchanges.append(
            {
                "type": kind,
                "ns": page.ns,
                "title": page.title,
                "pageid": page.pageid,
                "revid": page.revid,
                "rcid": len(self.recentchanges) + 1,
                "timestamp": page.timestamp,
            }
        )

    def _log(
        self,
        kind: str,
        action: str,
        page: FakePage,
        *,
        pageid: int | None = None,
        title: str | None = None,
        params: dict[str, Any] | None = None,
    ) -> None:
        self.logevents.append(
            {
                "logid": len(self.logevents) + 1,
                "ns": page.ns,
                "title": title or page.title,
                "pageid": page.pageid if pageid is None else pageid,
                "logpage": page.pageid,
                "type": kind,
                "action": action,
                "params": params or {},
                "timestamp": self.now(),
            }
        )

    def export_xml(self) -> str:
        """The live pages as a `Special:Export` document (export-0.10 schema)."""
        base = self.server + self.articlepath.replace("$1", "Main_Page")
        parts = [
            '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10" '
            'xml:lang="en">',
            f"<siteinfo><sitename>{escape(self.sitename)}</sitename><base>{escape(base)}</base>"
            "<generator>MediaWiki 1.35.2</generator></siteinfo>",
        ]
        for page in self.pages.values():
            redirect = f'<redirect title="{escape(page.redirect_to)}"/>' if page.redirect_to else ""
            text = page.wikitext + "".join(f"\n[[Category:{c}]]" for c in page.categories)
            parts.append(
                f"<page><title>{escape(page.title)}</title><ns>{page.ns}</ns>"
                f"<id>{page.pageid}</id>{redirect}<revision><id>{page.revid}</id>"
                f"<timestamp>{page.timestamp}</timestamp>"
                f'<text bytes="{len(text.encode())}" xml:space="preserve">{escape(text)}</text>'
                "</revision></page>"
            )
        parts.append("</mediawiki>")
        return "\n".join(parts)


@dataclass
class Fault:
    """A failure the server answers with instead of the real response."""

    kind: str  # maxlag | 429 | 503 | malformed | nested | drip | warning | slow | hostile
    remaining: int = 1
    when: Callable[[Mapping[str, str]], bool] | None = None
    retry_after: str = "0"
    location: str = ""
    mutate: Callable[[dict[str, Any]], None] | None = None


@cache
def gzip_bomb(megabytes: int = 255) -> bytes:
    """`megabytes` MB of zeros as one gzip member of about 1 KB per MB.

    Deflate blocks after a full flush do not refer back, so one compressed megabyte repeated
    is a valid stream (compressing 255 MB at level 9 would take the test seconds).
    """
    block = b"0" * (1024 * 1024)
    packer = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    segment = packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(megabytes):
        crc = zlib.crc32(block, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    trailer = struct.pack("<II", crc, (megabytes * len(block)) & 0xFFFFFFFF)
    return header + segment * megabytes + packer.flush() + trailer


class MediaWikiServer:
    """`FakeWiki` served over HTTP at `api_url` while the context is open."""

    def __init__(self, wiki: FakeWiki | None = None) -> None:
        self.wiki = wiki or FakeWiki()
        self.requests: list[dict[str, str]] = []
        self.bytes_sent: list[int] = []
        self.user_agents: set[str] = set()
        self.faults: list[Fault] = []
        self.slow_seconds = 0.0
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def api_url(self) -> str:
        """The address of api.php."""
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/w-en/api.php"

    def __enter__(self) -> "MediaWikiServer":
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out as two writes; with Nagle on, the body would wait for
            # the client's delayed ACK (40 ms per request).
            disable_nagle_algorithm = True

            def do_GET(self) -> None:
                server._handle(self)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        assert self._httpd is not None
        assert self._thread is not None
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def inject(
        self,
        kind: str,
        *,
        times: int = 1,
        when: Callable[[Mapping[str, str]], bool] | None = None,
        retry_after: str = "0",
        location: str = "",
        mutate: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        """Answer the next `times` matching requests with a fault."""
        with self._lock:
            self.faults.append(Fault(kind, times, when, retry_after, location, mutate))

    def count(self, **match: str) -> int:
        """How many recorded requests had all of these parameter values."""
        with self._lock:
            return sum(all(r.get(k) == v for k, v in match.items()) for r in self.requests)

    def sent(self, answers: int = 1, *, wait: float = 30.0) -> list[int]:
        """`bytes_sent`, once `answers` hostile bodies have ended (the client hung up)."""
        deadline = time.monotonic() + wait
        while len(self.bytes_sent) < answers and time.monotonic() < deadline:
            time.sleep(0.01)
        return list(self.bytes_sent)

    def reset_counts(self) -> None:
        """Forget the recorded requests."""
        with self._lock:
            self.requests.clear()

    def _take_fault(self, params: Mapping[str, str]) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.remaining > 0 and (fault.when is None or fault.when(params)):
                    fault.remaining -= 1
                    return fault
        return None

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            self._respond(handler)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _respond(self, handler: BaseHTTPRequestHandler) -> None:
        url = urlsplit(handler.path)
        params = dict(parse_qsl(url.query, keep_blank_values=True))
        with self._lock:
            self.requests.append(params)
            self.user_agents.add(handler.headers.get("User-Agent", ""))
        fault = self._take_fault(params)
        stall = fault is not None and fault.kind == "slow"
        if stall or self.slow_seconds:
            # One answer stalls past a timeout (`slow`), or every answer takes a while.
            time.sleep(
                float(fault.retry_after) if fault is not None and stall else self.slow_seconds
            )
        headers: dict[str, str] = {}
        status = 200
        if fault is not None and fault.kind in {"429", "503"}:
            status, headers["Retry-After"] = int(fault.kind), fault.retry_after
            body = f"<html><body>{fault.kind}</body></html>".encode()
            return self._send(handler, status, body, "text/html", headers)
        if fault is not None and fault.kind in {"gzip_bomb", "endless", "redirect", "drip"}:
            return self._hostile(handler, fault)
        if fault is not None and fault.kind in {"continue_forever", "continue_same"}:
            n = 0 if fault.kind == "continue_same" else len(self.requests)
            data = {"continue": {"cmcontinue": f"page|{n:x}|{n}", "continue": "-||"}}
            data["query"] = {"categorymembers": []}
            return self._send(handler, 200, json.dumps(data).encode(), "application/json", {})
        if fault is not None and fault.kind == "maxlag":
            headers["Retry-After"] = fault.retry_after
            headers["X-Database-Lag"] = "7"
            data: dict[str, Any] = _error("maxlag", "Waiting for 10.0.0.1: 7 seconds lagged.")
        elif url.path != "/w-en/api.php":
            return self._send(handler, 404, b"not found", "text/plain", {})
        else:
            try:
                with self.wiki.lock:
                    data = _Api(self.wiki, params).answer()
            except _ApiError as exc:
                data = _error(exc.code, exc.info)
        if fault is not None and fault.kind == "mutate" and fault.mutate is not None:
            fault.mutate(data)
        if fault is not None and fault.kind == "warning":
            data["warnings"] = {"main": {"warnings": 'Unrecognized parameter: "bogus".'}}
        body = json.dumps(data).encode()
        if fault is not None and fault.kind == "nested":
            # 400 KB: an array nested 200,000 deep inside the answer's first key.
            depth = 200_000
            body = b'{"parse": ' + b"[" * depth + b"]" * depth + b"}"
        if fault is not None and fault.kind == "malformed":
            body = body[: len(body) // 2]
        self._send(handler, status, body, "application/json; charset=utf-8", headers)

    def _hostile(self, handler: BaseHTTPRequestHandler, fault: Fault) -> None:
        # The client hangs up mid-answer: do not wait on the connection for another request.
        handler.close_connection = True
        if fault.kind == "redirect":
            handler.send_response(302)
            handler.send_header("Location", fault.location)
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return
        if fault.kind == "drip":
            # A tar-pit: a byte every quarter second of a body that never completes.
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", "100000")
            handler.end_headers()
            dripped = 0
            try:
                while dripped < 100_000:
                    handler.wfile.write(b" ")
                    handler.wfile.flush()
                    dripped += 1
                    time.sleep(0.25)
            except (BrokenPipeError, ConnectionResetError):
                pass
            finally:
                with self._lock:
                    self.bytes_sent.append(dripped)
            return
        if fault.kind == "gzip_bomb":
            headers = {"Content-Encoding": "gzip"}
            return self._send(handler, 200, gzip_bomb(), "application/json", headers)
        # An endless chunked body of JSON-looking bytes, until the client hangs up (or 2 GB).
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        piece = b"0" * (64 * 1024)
        chunk = f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
        sent = 0
        try:
            handler.wfile.write(b'5\r\n{"q":\r\n')
            while sent < 2 * 1024 * 1024 * 1024:
                handler.wfile.write(chunk)
                sent += len(piece)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            with self._lock:
                self.bytes_sent.append(sent)

    @staticmethod
    def _send(
        handler: BaseHTTPRequestHandler,
        status: int,
        body: bytes,
        content_type: str,
        headers: Mapping[str, str],
    ) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        try:
            handler.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            handler.close_connection = True  # a bounded client hung up on a large answer


class _ApiError(Exception):
    def __init__(self, code: str, info: str) -> None:
        super().__init__(info)
        self.code, self.info = code, info


def _error(code: str, info: str) -> dict[str, Any]:
    return {
        "error": {"code": code, "info": info, "docref": "See api.php for API usage."},
        "servedby": "mw-fake",
    }


class _Api:
    """One request's answer, computed from the wiki's state."""

    def __init__(self, wiki: FakeWiki, params: Mapping[str, str]) -> None:
        self.wiki = wiki
        self.params = params

    def answer(self) -> dict[str, Any]:
        if self.params.get("format") != "json" or self.params.get("formatversion") != "2":
            raise _ApiError("badvalue", "this stand-in speaks format=json&formatversion=2 only")
        action = self.params.get("action")
        if action == "parse":
            return self.parse()
        if action != "query":
            raise _ApiError("badvalue", f'Unrecognized value for parameter "action": {action}.')
        if self.params.get("meta") == "siteinfo":
            return {"batchcomplete": True, "query": {"general": self.general()}}
        lists = {
            "categorymembers": self.categorymembers,
            "recentchanges": self.recentchanges,
            "logevents": self.logevents,
        }
        if self.params.get("list") in lists:
            return lists[self.params["list"]]()
        if self.params.get("prop") in {"revisions", "categories"}:
            return self.pages_prop(self.params["prop"])
        raise _ApiError("badvalue", "unsupported query")

    def general(self) -> dict[str, Any]:
        w = self.wiki
        return {
            "mainpage": "Main Page",
            "base": w.server + w.articlepath.replace("$1", "Main_Page"),
            "sitename": w.sitename,
            "generator": "MediaWiki 1.35.2",
            "server": w.server,
            "articlepath": w.articlepath,
            "scriptpath": "/w-en",
            "time": w.now(),
        }

    def _limit(self, name: str, default: int = 10, maximum: int = 500) -> int:
        value = self.params.get(name, str(default))
        return maximum if value == "max" else min(int(value), maximum)

    def categorymembers(self) -> dict[str, Any]:
        category = _title(self.params["cmtitle"].removeprefix("Category:"))
        namespaces = {int(n) for n in self.params.get("cmnamespace", "").split("|") if n}
        members = sorted(
            (
                p
                for p in self.wiki.pages.values()
                if category in p.categories and (not namespaces or p.ns in namespaces)
            ),
            key=lambda p: (p.title, p.pageid),
        )
        start = 0
        if "cmcontinue" in self.params:
            _, sortkey, pageid = self.params["cmcontinue"].split("|")
            after = (bytes.fromhex(sortkey).decode(), int(pageid))
            start = next((i for i, p in enumerate(members) if (p.title, p.pageid) >= after), 0)
        limit = self._limit("cmlimit")
        batch = members[start : start + limit]
        data: dict[str, Any] = {
            "batchcomplete": True,
            "query": {
                "categorymembers": [
                    {
                        "pageid": p.pageid,
                        "ns": p.ns,
                        "title": p.title,
                        "type": "subcat" if p.ns == 14 else "page",
                    }
                    for p in batch
                ]
            },
        }
        if start + limit < len(members):
            following = members[start + limit]
            data["continue"] = {
                "cmcontinue": f"page|{following.title.encode().hex()}|{following.pageid}",
                "continue": "-||",
            }
        return data

    def pages_prop(self, prop: str) -> dict[str, Any]:
        if "pageids" in self.params:
            keys = [k for k in self.params["pageids"].split("|") if k]
        else:
            keys = [k for k in self.params.get("titles", "").split("|") if k]
        if len(keys) > MAX_IDS:
            raise _ApiError("toomanyvalues", f"Too many values supplied. The limit is {MAX_IDS}.")
        query: dict[str, Any] = {}
        normalized, redirects, pages = [], [], []
        for key in keys:
            if "pageids" in self.params:
                page = self.wiki.pages.get(int(key))
                if page is None:
                    pages.append({"pageid": int(key), "missing": True})
                    continue
            else:
                if _title(key) != key:
                    normalized.append({"fromencoded": False, "from": key, "to": _title(key)})
                page = self.wiki.by_title(key)
                if page is None:
                    pages.append({"ns": 0, "title": _title(key), "missing": True})
                    continue
            if page.redirect_to and "redirects" in self.params:
                target = self.wiki.by_title(page.redirect_to)
                redirects.append({"from": page.title, "to": page.redirect_to})
                if target is None:
                    pages.append({"ns": 0, "title": page.redirect_to, "missing": True})
                    continue
                page = target
            entry: dict[str, Any] = {"pageid": page.pageid, "ns": page.ns, "title": page.title}
            if prop == "revisions":
                entry["revisions"] = [
                    {"revid": page.revid, "parentid": page.revid - 1, "timestamp": page.timestamp}
                ]
            elif page.categories:
                entry["categories"] = [
                    {"ns": 14, "title": f"Category:{c}"} for c in page.categories
                ]
            if entry not in pages:
                pages.append(entry)
        if normalized:
            query["normalized"] = normalized
        if redirects:
            query["redirects"] = redirects
        query["pages"] = pages
        return {"batchcomplete": True, "query": query}

    def _log_window(self, rows: list[dict[str, Any]], prefix: str, id_key: str) -> dict[str, Any]:
        start = self.params.get(f"{prefix}start", "")
        if self.params.get(f"{prefix}dir") != "newer":
            raise _ApiError("badvalue", "this stand-in lists changes oldest first only")
        selected = [r for r in rows if r["timestamp"] >= start]
        if f"{prefix}continue" in self.params:
            ts, row_id = self.params[f"{prefix}continue"].split("|")
            selected = [r for r in selected if (r["timestamp"], r[id_key]) >= (ts, int(row_id))]
        selected.sort(key=lambda r: (r["timestamp"], r[id_key]))
        limit = self._limit(f"{prefix}limit")
        data: dict[str, Any] = {"batchcomplete": True, "query": {}}
        if len(selected) > limit:
            nxt = selected[limit]
            data["continue"] = {
                f"{prefix}continue": f"{nxt['timestamp']}|{nxt[id_key]}",
                "continue": "-||",
            }
        data["query"]["rows"] = [dict(r) for r in selected[:limit]]
        return data

    def recentchanges(self) -> dict[str, Any]:
        types = set(self.params.get("rctype", "edit|new|log").split("|"))
        namespaces = {int(n) for n in self.params.get("rcnamespace", "").split("|") if n}
        rows = [
            r
            for r in self.wiki.recentchanges
            if r["type"] in types and (not namespaces or r["ns"] in namespaces)
        ]
        data = self._log_window(rows, "rc", "rcid")
        data["query"]["recentchanges"] = data["query"].pop("rows")
        return data

    def logevents(self) -> dict[str, Any]:
        data = self._log_window(self.wiki.logevents, "le", "logid")
        data["query"]["logevents"] = data["query"].pop("rows")
        return data

    def parse(self) -> dict[str, Any]:
        if "pageid" in self.params:
            page = self.wiki.pages.get(int(self.params["pageid"]))
            if page is None:
                raise _ApiError(
                    "nosuchpageid", f"There is no page with ID {self.params['pageid']}."
                )
        else:
            page = self.wiki.by_title(self.params.get("page", ""))
            if page is None:
                raise _ApiError("missingtitle", "The page you specified doesn't exist.")
        redirects: list[dict[str, str]] = []
        if page.redirect_to and "redirects" in self.params:
            target = self.wiki.by_title(page.redirect_to)
            if target is None:
                raise _ApiError("missingtitle", "The page you specified doesn't exist.")
            redirects.append({"from": page.title, "to": target.title})
            page = target
        text = page.html
        if "disablelimitreport" not in self.params:
            text += "\n<!-- \nNewPP limit report\nCPU time usage: 0.010 seconds\n-->"
        return {
            "parse": {
                "title": page.title,
                "pageid": page.pageid,
                "revid": page.revid,
                "redirects": redirects,
                "text": text,
                "categories": [
                    {"sortkey": "", "category": c.replace(" ", "_")} for c in page.categories
                ],
                "displaytitle": f'<span class="mw-page-title-main">{escape(page.title)}</span>',
            }
        }


# Content: the migrated iDempiere pages in ../shared (test use only; they never ship).


@dataclass(frozen=True)
class SharedPage:
    """A page of `../shared/fixtures/wiki/docs_md` with its wiki title and category."""

    title: str
    category: str
    markdown: str


def shared_pages() -> Iterator[SharedPage]:
    """The 47 Markdown pages of the shared fixtures, as wiki pages with a category each."""
    manifest = shared_wiki_file("docs_md_manifest.jsonl")
    for line in manifest.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        name = Path(entry["file"]).name
        markdown = (SHARED_WIKI_FIXTURES / entry["file"]).read_text(encoding="utf-8")
        if name.startswith("new-features__"):
            release = name.split("__")[1].removeprefix("v")
            category = f"New Features v{release}"
        elif "plugin-development" in name:
            category = "Plug-In Development"
        else:
            category = "Developer"
        title = entry.get("wiki_title") or Path(entry["path"]).stem.replace("-", " ").title()
        yield SharedPage(_title(title), category, markdown)


_MARKDOWN = MarkdownIt("commonmark").enable("table")


def rendered_html(markdown: str) -> str:
    """Markdown rendered the way `action=parse` wraps a page (headings with `mw-headline`)."""
    if markdown.startswith("---\n"):
        markdown = markdown.split("\n---\n", 1)[-1]
    html = _MARKDOWN.render(markdown)
    for level in range(1, 7):
        html = html.replace(f"<h{level}>", f'<h{level}><span class="mw-headline">')
        html = html.replace(f"</h{level}>", f"</span></h{level}>")
    return f'<div class="mw-parser-output">{html}</div>'
