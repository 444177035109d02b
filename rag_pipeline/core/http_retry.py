"""One retry policy for the HTTP clients (the MediaWiki API, the LLM providers), on tenacity.

A client raises `RetryableError` for a failure worth another try (HTTP 429/5xx, a timeout, a
dropped connection, a body cut short), with the server's `Retry-After` when it sent one; any
other exception ends the call at once. `retrying` turns a `RetryPolicy` into a tenacity
`Retrying`: exponential backoff (with full jitter, or without for a person watching the
waits), replaced by the server's `Retry-After` when it sent one (it knows when it will be
back), and an absolute deadline past which no retry starts. When the attempts run out the
last `RetryableError` is raised again, so the client words the final message itself.
"""

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from tenacity import RetryCallState, Retrying, retry_if_exception_type


class RetryableError(Exception):
    """A failure worth another try; the message says what went wrong in one line.

    Attributes:
        retry_after: the seconds the server asked to wait (`Retry-After`), if it said.
    """

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True)
class RetryPolicy:
    """How failed requests are retried.

    Attributes:
        attempts: total tries per request (1 = no retry).
        base_delay: seconds before the first retry; doubled for each further one.
        max_delay: the longest single wait, `Retry-After` included.
        jitter: wait a random time up to the backoff (full jitter: many clients retrying at
            once spread out) instead of exactly the backoff.
        give_up_on_long_retry_after: a `Retry-After` above `max_delay` ends the retries
            (the caller reports when to come back) instead of being cut to `max_delay`.
    """

    attempts: int = 5
    base_delay: float = 0.5
    max_delay: float = 60.0
    jitter: bool = True
    give_up_on_long_retry_after: bool = False

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        """The wait before retry number `attempt` (1-based): what the server asked, if it did."""
        if retry_after is not None:
            return min(retry_after, self.max_delay)
        backoff = self.base_delay * 2 ** (attempt - 1)
        if self.jitter:
            backoff = rng.uniform(0, backoff)
        return min(backoff, self.max_delay)


BeforeSleep = Callable[[int, float, str], None]


def retrying(
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], None] = time.sleep,
    deadline: float | None = None,
    before_sleep: BeforeSleep | None = None,
    rng: random.Random | None = None,
) -> Retrying:
    """A tenacity `Retrying` for `policy`; use as `for attempt in retrying(...): with attempt:`.

    Args:
        policy: attempts, backoff and `Retry-After` handling.
        sleep: waits between attempts (tests pass a recorder).
        deadline: a `time.monotonic()` value; no retry starts whose wait would end after it.
        before_sleep: told (attempt number, wait in seconds, the failure) before each wait.
        rng: the jitter's random source.
    """
    random_source = rng or random.Random()

    def wait(state: RetryCallState) -> float:
        return policy.delay(state.attempt_number, _retry_after_of(state), random_source)

    def stop(state: RetryCallState) -> bool:
        if state.attempt_number >= policy.attempts:
            return True
        asked = _retry_after_of(state)
        if policy.give_up_on_long_retry_after and asked is not None and asked > policy.max_delay:
            return True
        return deadline is not None and time.monotonic() + state.upcoming_sleep >= deadline

    def notify(state: RetryCallState) -> None:
        if before_sleep is not None:
            outcome = state.outcome
            failure = outcome.exception() if outcome is not None else None
            before_sleep(state.attempt_number, state.upcoming_sleep, str(failure))

    return Retrying(
        retry=retry_if_exception_type(RetryableError),
        wait=wait,
        stop=stop,
        sleep=sleep,
        before_sleep=notify,
        reraise=True,
    )


def _retry_after_of(state: RetryCallState) -> float | None:
    outcome = state.outcome
    failure = outcome.exception() if outcome is not None and outcome.failed else None
    return failure.retry_after if isinstance(failure, RetryableError) else None


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a `Retry-After` header: a number of seconds or an HTTP date (RFC 9110)."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            moment = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        seconds = (moment - datetime.now(UTC)).total_seconds()
    # NaN and infinity are not waits a server can mean.
    if seconds != seconds or seconds == float("inf"):
        return None
    return max(0.0, seconds)
