"""A polite, robust MediaWiki Action API client (httpx, synchronous, thread-safe).

Polite: a descriptive User-Agent (the Wikimedia User-Agent policy asks for a contact), `maxlag`
on every request so a lagging wiki refuses us before it suffers, and a bounded number of
requests in flight (`max_concurrency`, a semaphore around each request, so the callers' thread
pools cannot exceed it).

Robust: 429, 5xx, timeouts, connection errors, `maxlag` errors and bodies that are not JSON are
retried with exponential backoff and full jitter; a `Retry-After` header (sent with 429, 503 and
maxlag) is honoured as the minimum wait. API `error` objects raise `WikiApiError` with the
wiki's code and text; `warnings` are logged and kept in `self.warnings` so a run can show them.

Every request uses `format=json&formatversion=2` (lists instead of id-keyed objects, booleans
instead of empty strings); MediaWiki 1.35 (the iDempiere wiki) answers errors as
`{"error": {"code", "info"}}` with HTTP 200, so errors are read from the body, not the status.
"""

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote

import httpx

logger = logging.getLogger(__name__)

DEFAULT_USER_AGENT = "rag_pipeline/0.1 (iDempiere knowledge index; https://www.idempiere.org)"
# MediaWiki refuses more than 50 titles or page ids per query for clients without apihighlimits.
MAX_IDS_PER_QUERY = 50
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


class WikiApiError(RuntimeError):
    """The wiki answered with an API `error` object (or could not be reached in time)."""

    def __init__(self, code: str, info: str) -> None:
        super().__init__(f"MediaWiki API error {code}: {info}")
        self.code = code
        self.info = info


@dataclass(frozen=True)
class RetryPolicy:
    """How failed requests are retried.

    Attributes:
        attempts: total tries per request (1 = no retry).
        base_delay: seconds before the first retry; doubled each time, with full jitter.
        max_delay: the cap of one wait, `Retry-After` included (a wiki asking for an hour
            should fail this run, not hang it).
    """

    attempts: int = 5
    base_delay: float = 0.5
    max_delay: float = 60.0

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        """The wait before retry number `attempt` (1-based)."""
        backoff = rng.uniform(0, self.base_delay * 2 ** (attempt - 1))
        return min(max(backoff, retry_after or 0.0), self.max_delay)


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
    """Requests to one wiki's `api.php`, retried and rate-bounded.

    Args:
        api_url: the wiki's api.php.
        user_agent: sent with every request.
        max_concurrency: requests in flight at most, across threads.
        maxlag: seconds of database replication lag above which the wiki should refuse us.
        timeout: seconds per request.
        retry: the retry policy.
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
        sleep: Callable[[float], None] = time.sleep,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.api_url = api_url
        self.maxlag = maxlag
        self.retry = retry or RetryPolicy()
        self.max_concurrency = max_concurrency
        self.warnings: list[str] = []
        self.request_count = 0
        self._sleep = sleep
        self._rng = random.Random()
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self._lock = threading.Lock()
        self._siteinfo: SiteInfo | None = None
        self._siteinfo_lock = threading.Lock()
        self._http = httpx.Client(
            headers={"User-Agent": user_agent, "Accept-Encoding": "gzip"},
            timeout=timeout,
            transport=transport,
            # An http:// URL or a moved api.php answers with a redirect; HTTP ones are followed.
            follow_redirects=True,
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

    def get(self, params: Mapping[str, str | int]) -> dict[str, Any]:
        """One API request (GET), retried; the decoded JSON response.

        Raises:
            WikiApiError: the wiki answered with an `error` (after retries for `maxlag`), or
                it kept failing (HTTP status, timeout, malformed JSON) through every attempt.
        """
        query: dict[str, str | int] = {"format": "json", "formatversion": 2, **params}
        if self.maxlag:
            query["maxlag"] = self.maxlag
        last_problem = ""
        for attempt in range(1, self.retry.attempts + 1):
            retry_after: float | None = None
            try:
                with self._slots:
                    self._count()
                    response = self._http.get(self.api_url, params=query)
                retry_after = _retry_after(response.headers.get("Retry-After"))
                if response.status_code in _RETRY_STATUS:
                    last_problem = f"HTTP {response.status_code}"
                else:
                    response.raise_for_status()
                    data = _decode(response)
                    error = data.get("error")
                    if isinstance(error, dict) and error.get("code") == "maxlag":
                        last_problem = f"maxlag: {error.get('info', '')}"
                    elif isinstance(error, dict):
                        raise WikiApiError(str(error.get("code")), str(error.get("info", "")))
                    else:
                        self._note_warnings(data.get("warnings"), query)
                        return data
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                last_problem = f"{type(exc).__name__}: {exc}"
            except _MalformedResponseError as exc:
                last_problem = str(exc)
            except httpx.HTTPStatusError as exc:
                # 4xx other than 429: asking again gives the same answer.
                raise WikiApiError(
                    f"http{exc.response.status_code}", f"{self.api_url} refused the request"
                ) from exc
            if attempt < self.retry.attempts:
                wait = self.retry.delay(attempt, retry_after, self._rng)
                logger.info(
                    "wiki request failed (%s); retry %d in %.1f s", last_problem, attempt, wait
                )
                self._sleep(wait)
        raise WikiApiError(
            "unavailable", f"{self.api_url}: {last_problem} after {self.retry.attempts} attempts"
        )

    def query_all(self, params: Mapping[str, str | int]) -> Iterator[dict[str, Any]]:
        """Every batch of an `action=query`, following `continue` until the wiki says done."""
        continuation: dict[str, Any] = {}
        while True:
            data = self.get({"action": "query", **params, **continuation})
            yield data.get("query", {})
            next_continue = data.get("continue")
            if not isinstance(next_continue, dict):
                return
            continuation = {str(k): str(v) for k, v in next_continue.items()}  # type: ignore[misc]

    def siteinfo(self) -> SiteInfo:
        """The wiki's name, version, server, article path and clock (cached per client)."""
        with self._siteinfo_lock:  # fetch threads ask at once; one request answers all
            if self._siteinfo is not None:
                return self._siteinfo
            data = self.get({"action": "query", "meta": "siteinfo", "siprop": "general"})
            general = data["query"]["general"]
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
        data = self.get({"action": "query", "meta": "siteinfo", "siprop": "general"})
        return str(data["query"]["general"].get("time", ""))

    def _count(self) -> None:
        with self._lock:
            self.request_count += 1

    def _note_warnings(self, warnings: object, query: Mapping[str, str | int]) -> None:
        if not isinstance(warnings, dict):
            return
        for module, warning in warnings.items():  # type: ignore[misc]
            text = warning.get("warnings", warning) if isinstance(warning, dict) else warning  # type: ignore[misc]
            message = f"{module}: {text}"
            logger.warning("MediaWiki API warning (%s): %s", query.get("action"), message)
            with self._lock:
                if message not in self.warnings:
                    self.warnings.append(message)


class _MalformedResponseError(ValueError):
    pass


def _decode(response: httpx.Response) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError as exc:
        # A proxy's HTML error page or a response cut off mid-way: worth another try.
        raise _MalformedResponseError(f"response is not JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise _MalformedResponseError("response is not a JSON object")
    return data  # type: ignore[return-value]


def _retry_after(value: str | None) -> float | None:
    """Seconds from a `Retry-After` header (MediaWiki sends seconds; HTTP dates are rare)."""
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        try:
            return max(parsedate_to_datetime(value).timestamp() - time.time(), 0.0)
        except (TypeError, ValueError):
            return None


def article_address(pattern: str, title: str) -> str:
    """`pattern` (an article address with `$1`) for `title`, spelled as MediaWiki links it."""
    return pattern.replace("$1", quote(title.replace(" ", "_"), safe="/:()',!"))


def batched(items: list[str], size: int = MAX_IDS_PER_QUERY) -> Iterator[list[str]]:
    """`items` in consecutive slices of at most `size` (the API's per-query id limit)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
