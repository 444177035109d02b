"""Reading one wiki response within bounds: its size on the wire, decompressed, and in time.

httpx decompresses a gzip body a network read at a time with no limit on the output: 64 KB
of a gzip bomb become 64 MB at once, and `response.read()` keeps reading an endless chunked
body. Here the raw body is streamed, its bytes counted, and gzip or deflate inflated with a
cap on each step's output (`zlib`'s `max_length`), so no more than `limit` bytes are ever
held; past `limit`, or past the deadline, reading stops and the connection is dropped.
"""

import time
import zlib

import httpx

# The encodings the client asks for (`Accept-Encoding: gzip`) and identity; deflate is
# accepted as servers answer it to gzip requests too.
_WBITS = {"gzip": zlib.MAX_WBITS | 16, "x-gzip": zlib.MAX_WBITS | 16, "deflate": zlib.MAX_WBITS}


class BodyTooLargeError(Exception):
    """The response is larger than the limit (on the wire or decompressed)."""


class BodyTimeoutError(Exception):
    """The response did not arrive in full before the deadline."""


class BodyEncodingError(Exception):
    """The response is compressed in a way the client did not ask for, or corruptly."""


def read_body(response: httpx.Response, *, limit: int, deadline: float) -> bytes:
    """The decoded body of a streamed `response`: at most `limit` bytes, before `deadline`.

    Args:
        response: a response from `Client.stream`, its body not read yet.
        limit: the most bytes the body may have, compressed or not.
        deadline: a `time.monotonic()` value.

    Raises:
        BodyTooLargeError: more than `limit` bytes were sent or would be decompressed.
        BodyTimeoutError: the deadline passed while the body was arriving.
        BodyEncodingError: an unknown `Content-Encoding`, or a corrupt compressed body.
    """
    declared = response.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise BodyTooLargeError(f"the response is {int(declared):,} bytes, more than {limit:,}")
    inflater = _inflater(response.headers.get("content-encoding", ""))
    body = bytearray()
    received = 0
    for chunk in response.iter_raw():
        received += len(chunk)
        if received > limit:
            raise BodyTooLargeError(f"the response is more than {limit:,} bytes")
        if inflater is None:
            body += chunk
        else:
            _inflate(inflater, chunk, body, limit)
        if time.monotonic() > deadline:
            raise BodyTimeoutError(f"the response took longer than allowed ({received:,} bytes)")
    if inflater is not None:
        try:
            body += inflater.flush()
        except zlib.error as exc:
            raise BodyEncodingError(f"corrupt compressed response ({exc})") from None
        if len(body) > limit:
            raise BodyTooLargeError(f"the response is more than {limit:,} bytes decompressed")
    return bytes(body)


def _inflater(encoding: str) -> "zlib._Decompress | None":
    name = encoding.strip().lower()
    if name in ("", "identity"):
        return None
    if name not in _WBITS:
        raise BodyEncodingError(f"the response is compressed with {name[:40]!r}, not gzip")
    return zlib.decompressobj(_WBITS[name])


def _inflate(inflater: "zlib._Decompress", chunk: bytes, body: bytearray, limit: int) -> None:
    """Append `chunk` inflated to `body`, never producing more than `limit` + 1 bytes."""
    data = chunk
    while data and not inflater.eof:
        room = limit + 1 - len(body)
        try:
            body += inflater.decompress(data, room)
        except zlib.error as exc:
            raise BodyEncodingError(f"corrupt compressed response ({exc})") from None
        if len(body) > limit:
            raise BodyTooLargeError(f"the response is more than {limit:,} bytes decompressed")
        data = inflater.unconsumed_tail


def same_origin(one: httpx.URL, other: httpx.URL) -> bool:
    """True when both addresses have the same scheme, host and port (default ports filled)."""
    return (one.scheme, one.host, _port(one)) == (other.scheme, other.host, _port(other))


def _port(url: httpx.URL) -> int | None:
    if url.port is not None:
        return url.port
    return {"http": 80, "https": 443}.get(url.scheme)
