"""A polite, bounded MediaWiki Action API client (httpx, synchronous, thread-safe).

Polite: a descriptive User-Agent (the Wikimedia User-Agent policy asks for a contact), `maxlag`
on every request so a lagging wiki refuses us before it suffers, and a bounded number of
requests in flight (`max_concurrency`, a semaphore around each request, so the callers' thread
pools cannot exceed it).

Robust: 429, 5xx, timeouts, connection errors, `maxlag` errors and bodies that are not JSON are
retried with exponential backoff and full jitter, or after the wait a `Retry-After` header asks
(sent with 429, 503 and maxlag; `rag_pipeline.core.http_retry`). API `error` objects raise
`WikiApiError` with the wiki's code and text; `warnings` are logged and kept in `self.warnings`.

Bounded, because the wiki is a server on the internet: a response is read as a stream and
dropped past `max_response_bytes` on the wire or decompressed (`http.py`: a gzip bomb never
inflates past the cap, an endless body stops there) or past `max_request_seconds`; a listing
that keeps answering `continue` stops after `max_listing_requests` requests or
`max_listing_seconds`; redirects are followed only to the scheme, host and port of `api_url`
(anything else could answer in the wiki's name).

Every request uses `format=json&formatversion=2` (lists instead of id-keyed objects, booleans
instead of empty strings), decoded with a bound on nesting (`core/json_limits.py`: too deep fails
the request as `toodeep`, not retried); MediaWiki 1.35 (the iDempiere wiki) answers errors as
`{"error": {"code", "info"}}` with HTTP 200, so errors are read from the body, not the status.
"""

import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import quote

import httpx

from rag_pipeline.core.http_retry import RetryableError, RetryPolicy, parse_retry_after, retrying
from rag_pipeline.core.json_limits import JSONTooDeepError, loads_bounded
from rag_pipeline.core.redact import url_without_credentials
from rag_pipeline.sources.wiki.http import (
    BodyEncodingError,
    BodyTimeoutError,
    BodyTooLargeError,
    read_body,
    same_origin,
)

logger = logging.getLogger(__name__)

DEFAULT_USER_AGENT = "rag_pipeline/0.1 (iDempiere knowledge index; https://www.idempiere.org)"
# MediaWiki refuses more than 50 titles or page ids per query for clients without apihighlimits.
MAX_IDS_PER_QUERY = 50
DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024
DEFAULT_MAX_LISTING_REQUESTS = 1000
DEFAULT_MAX_LISTING_SECONDS = 900.0
DEFAULT_MAX_FETCH_SECONDS = 300.0
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
_MAX_REDIRECTS = 5
_ASCII_INT = re.compile(r"-?[0-9]{1,18}")


class WikiApiError(RuntimeError):
    """The wiki answered with an API `error` object (or could not be reached in time)."""

    def __init__(self, code: str, info: str) -> None:
        super().__init__(f"MediaWiki API error {code}: {info}")
        self.code = code
        self.info = info


class MalformedEntryError(ValueError):
    """A value in the wiki's answer is not what the API documents (an id that is no number)."""


def json_object(value: object) -> dict[str, Any]:
    """`value` if it is a JSON object, else an empty one (a server may send anything)."""
    return cast(dict[str, Any], value) if isinstance(value, dict) else {}


def json_objects(value: object) -> list[dict[str, Any]]:
    """The objects of `value` if it is a JSON list; other items and other values give none."""
    items = cast(list[object], value) if isinstance(value, list) else []
    return [json_object(item) for item in items if isinstance(item, dict)]


def strict_int(value: object, what: str) -> int:
    """`value` as an integer if it is one (or ASCII digits); else `MalformedEntryError`.

    `str.isdigit` and `int()` accept '²' and other Unicode digits; an id from a server is
    only ever ASCII.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _ASCII_INT.fullmatch(value.strip()):
        return int(value)
    raise MalformedEntryError(f"{what} is not a number: {str(value)[:40]!r}")


@dataclass(frozen=True)
class SiteInfo:
    """What the wiki says about itself (`meta=siteinfo`)."""

    sitename: str
    generator: str
    server: str
    articlepath: str
    time: str

    def page_url(self, title: str) -> str:
        """The address a person reads `title` at, e.g. https://wiki.idempiere.org/en/NF11_X."""
        # A protocol-relative server (`//wiki.example.org`) is common; links need a scheme.
        server = self.server if not self.server.startswith("//") else "https:" + self.server
        return article_address(server + self.articlepath, title)


class MediaWikiClient:
    """Requests to one wiki's `api.php`, retried, rate-bounded and size-bounded.

    Args:
        api_url: the wiki's api.php.
        user_agent: sent with every request.
        max_concurrency: requests in flight at most, across threads.
        maxlag: seconds of database replication lag above which the wiki should refuse us.
        timeout: seconds of silence per read (and to connect).
        retry: the retry policy.
        max_response_bytes: the largest response read, on the wire and decompressed.
        max_request_seconds: the longest one response may take to arrive in full.
        max_listing_requests: requests one listing (`query_all`) may make.
        max_listing_seconds: seconds one listing may take, retries included.
        max_fetch_seconds: seconds one `get` may take, every attempt and wait included (a
            server answering a byte a second would otherwise cost every attempt's
            `max_request_seconds`).
        sleep: waits between retries (tests pass a recorder instead of `time.sleep`).
        transport: an httpx transport, for tests that speak to an in-process app.
    """

    def __init__(
        self,
        api_url: str,
        *,
        user_agent: str = DEFAULT_USER_AGENT,
        max_concurrency: int = 4,
        maxlag: int = 5,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_request_seconds: float = 120.0,
        max_listing_requests: int = DEFAULT_MAX_LISTING_REQUESTS,
        max_listing_seconds: float = DEFAULT_MAX_LISTING_SECONDS,
        max_fetch_seconds: float = DEFAULT_MAX_FETCH_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.api_url = api_url
        self.shown_url = url_without_credentials(api_url)
        self.maxlag = maxlag
        self.retry = retry or RetryPolicy()
        self.max_concurrency = max_concurrency
        self.max_response_bytes = max_response_bytes
        self.max_request_seconds = max_request_seconds
        self.max_listing_requests = max_listing_requests
        self.max_listing_seconds = max_listing_seconds
        self.max_fetch_seconds = max_fetch_seconds
        self.warnings: list[str] = []
        self.request_count = 0
        self._origin = httpx.URL(api_url)
        self._sleep = sleep
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self._lock = threading.Lock()
        self._siteinfo: SiteInfo | None = None
        self._siteinfo_lock = threading.Lock()
        self._http = httpx.Client(
            headers={"User-Agent": user_agent, "Accept-Encoding": "gzip"},
            timeout=timeout,
            transport=transport,
            # Followed by hand, only within the API's origin (`_request`).
            follow_redirects=False,
            # One connection per concurrent request, kept alive between them.
            limits=httpx.Limits(max_connections=max_concurrency),
        )

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> "MediaWikiClient":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def get(
        self, params: Mapping[str, str | int], *, deadline: float | None = None
    ) -> dict[str, Any]:
        """One API request (GET), retried; the decoded JSON response.

        Args:
            params: the API parameters (format and maxlag are added).
            deadline: a `time.monotonic()` value no retry may wait past (a listing's).

        Raises:
            WikiApiError: the wiki answered with an `error` (after retries for `maxlag`), its
                answer broke a limit (code `toolarge`, `redirect`), or it kept failing (HTTP
                status, timeout, malformed JSON) through every attempt (code `unavailable`).
        """
        query: dict[str, str | int] = {"format": "json", "formatversion": 2, **params}
        if self.maxlag:
            query["maxlag"] = self.maxlag
        # The fetch budget bounds attempts and waits; a listing's deadline only the waits (the
        # listing reports it itself).
        budget = time.monotonic() + self.max_fetch_seconds
        end = budget if deadline is None else min(deadline, budget)
        attempts = 0
        try:
            for attempt in retrying(
                self.retry, sleep=self._sleep, deadline=end, before_sleep=_log_retry
            ):
                with attempt:
                    attempts = attempt.retry_state.attempt_number
                    return self._attempt(query, budget)
        except RetryableError as exc:
            spent = " (RAG_WIKI_FETCH_SECONDS spent)" if time.monotonic() >= budget else ""
            raise WikiApiError(
                "unavailable", f"{self.shown_url}: {exc} after {attempts} attempts{spent}"
            ) from None
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _attempt(self, query: dict[str, str | int], end: float) -> dict[str, Any]:
        with self._slots:
            self._count()
            status, headers, body = self._request(query, end)
        retry_after = parse_retry_after(headers.get("Retry-After"))
        if status in _RETRY_STATUS:
            raise RetryableError(f"HTTP {status}", retry_after=retry_after)
        if status >= 400:
            # 4xx other than 429: asking again gives the same answer.
            raise WikiApiError(f"http{status}", f"{self.shown_url} refused the request")
        data = _decode(body, self.shown_url)
        error = json_object(data.get("error"))
        if error.get("code") == "maxlag":
            raise RetryableError(f"maxlag: {error.get('info', '')}", retry_after=retry_after)
        if error:
            code, info = error.get("code"), error.get("info", "")
            raise WikiApiError(_one_line(str(code)), _one_line(str(info)))
        self._note_warnings(data.get("warnings"), query)
        return data

    def _request(self, query: dict[str, str | int], end: float) -> tuple[int, httpx.Headers, bytes]:
        """Status, headers and body of one GET, redirects within the API's origin followed,
        all of it within `max_request_seconds` and before `end` (the fetch budget's)."""
        url = self._origin.copy_merge_params(query)
        deadline = min(time.monotonic() + self.max_request_seconds, end)
        try:
            for _ in range(_MAX_REDIRECTS + 1):
                with self._http.stream("GET", url) as response:
                    if response.is_redirect:
                        url = self._redirect_target(response)
                        continue
                    if response.status_code >= 400:
                        return response.status_code, response.headers, b""
                    body = read_body(response, limit=self.max_response_bytes, deadline=deadline)
                    return response.status_code, response.headers, body
        except (httpx.TimeoutException, httpx.TransportError) as exc:
            raise RetryableError(_one_line(f"{type(exc).__name__}: {exc}")) from None
        except BodyTimeoutError as exc:
            if time.monotonic() >= end:
                raise RetryableError(f"{exc} (the fetch budget ran out)") from None
            raise RetryableError(f"{exc} (over {self.max_request_seconds:g} s)") from None
        except BodyTooLargeError as exc:
            raise WikiApiError(
                "toolarge", f"{self.shown_url}: {exc} (RAG_WIKI_MAX_BYTES sets the limit)"
            ) from None
        except BodyEncodingError as exc:
            raise RetryableError(str(exc)) from None
        raise WikiApiError("redirect", f"{self.shown_url}: more than {_MAX_REDIRECTS} redirects")

    def _redirect_target(self, response: httpx.Response) -> httpx.URL:
        location = response.headers.get("Location", "")
        try:
            target = response.url.join(location)
        except httpx.InvalidURL:
            target = None
        if target is None or not location or not same_origin(target, self._origin):
            shown = url_without_credentials(str(target or location))[:200]
            raise WikiApiError(
                "redirect",
                f"{self.shown_url} redirected to {_one_line(shown)}, another scheme, host or "
                "port: not followed (set RAG_WIKI_API_URL to the address the wiki serves)",
            )
        return target

    def query_all(self, params: Mapping[str, str | int]) -> Iterator[dict[str, Any]]:
        """Every batch of an `action=query`, following `continue` until the wiki says done.

        Raises:
            WikiApiError: (code `listinglimit`) the wiki kept answering `continue` past
                `max_listing_requests` requests or `max_listing_seconds`, or sent the same
                `continue` twice.
        """
        started = time.monotonic()
        deadline = started + self.max_listing_seconds
        what = _listing_name(params)
        continuation: dict[str, str] = {}
        seen: set[tuple[tuple[str, str], ...]] = set()
        for requests in range(1, self.max_listing_requests + 1):
            if time.monotonic() > deadline:
                raise WikiApiError(
                    "listinglimit",
                    f"listing {what} took more than {self.max_listing_seconds:g} s "
                    f"({requests - 1} requests; RAG_WIKI_LISTING_TIMEOUT_SECONDS)",
                )
            data = self.get({"action": "query", **params, **continuation}, deadline=deadline)
            yield json_object(data.get("query"))
            next_continue = json_object(data.get("continue"))
            if not next_continue:
                return
            continuation = {str(k): str(v) for k, v in next_continue.items()}
            token = tuple(sorted(continuation.items()))
            if token in seen:
                raise WikiApiError(
                    "listinglimit", f"listing {what}: the wiki sent the same `continue` twice"
                )
            seen.add(token)
        raise WikiApiError(
            "listinglimit",
            f"listing {what} still continued after {self.max_listing_requests} requests "
            "(RAG_WIKI_MAX_LISTING_REQUESTS)",
        )

    def siteinfo(self) -> SiteInfo:
        """The wiki's name, version, server, article path and clock (cached per client)."""
        with self._siteinfo_lock:  # fetch threads ask at once; one request answers all
            if self._siteinfo is not None:
                return self._siteinfo
            general = self._general()
            self._siteinfo = SiteInfo(
                sitename=str(general.get("sitename", "")),
                generator=str(general.get("generator", "")),
                server=str(general.get("server", "")),
                articlepath=str(general.get("articlepath", "/index.php/$1")),
                time=str(general.get("time", "")),
            )
        return self._siteinfo

    def server_time(self) -> str:
        """The wiki's clock now (uncached: the change sensor starts its cursor there)."""
        return str(self._general().get("time", ""))

    def _general(self) -> dict[str, Any]:
        data = self.get({"action": "query", "meta": "siteinfo", "siprop": "general"})
        general = json_object(json_object(data.get("query")).get("general"))
        if not general:
            raise WikiApiError("malformed", f"{self.shown_url}: siteinfo without `general`")
        return general

    def _count(self) -> None:
        with self._lock:
            self.request_count += 1

    def _note_warnings(self, warnings: object, query: Mapping[str, str | int]) -> None:
        for module, warning in json_object(warnings).items():
            text = json_object(warning).get("warnings", warning)
            message = _one_line(f"{module}: {text}")
            logger.warning("MediaWiki API warning (%s): %s", query.get("action"), message)
            with self._lock:
                if message not in self.warnings:
                    self.warnings.append(message)


def _log_retry(attempt: int, wait: float, problem: str) -> None:
    logger.info("wiki request failed (%s); retry %d in %.1f s", problem, attempt, wait)


def _listing_name(params: Mapping[str, str | int]) -> str:
    kind = params.get("list") or params.get("prop") or params.get("meta") or "query"
    target = params.get("cmtitle") or ""
    return _one_line(f"{kind} {target}".strip())[:120]


def _one_line(text: str) -> str:
    """Server text as one printable line of at most 300 characters."""
    return " ".join("".join(c if c.isprintable() else " " for c in text[:2000]).split())[:300]


def _decode(body: bytes, shown_url: str) -> dict[str, Any]:
    try:
        data = loads_bounded(body)
    except JSONTooDeepError as exc:
        # Asking again gives the same answer: fail this request (for a page, that page).
        raise WikiApiError("toodeep", f"{shown_url}: {exc}") from None
    except ValueError as exc:
        # A proxy's HTML error page or a response cut off mid-way: worth another try.
        raise RetryableError(_one_line(f"response is not JSON ({exc})")) from None
    if not isinstance(data, dict):
        raise RetryableError("response is not a JSON object")
    return json_object(data)


def article_address(pattern: str, title: str) -> str:
    """`pattern` (an article address with `$1`) for `title`, spelled as MediaWiki links it."""
    return pattern.replace("$1", quote(title.replace(" ", "_"), safe="/:()',!"))


def batched(items: list[str], size: int = MAX_IDS_PER_QUERY) -> Iterator[list[str]]:
    """`items` in consecutive slices of at most `size` (the API's per-query id limit)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
