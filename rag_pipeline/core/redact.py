"""Secrets kept out of what is printed or logged: API keys and the credentials of a URL.

Masking runs on the whole text before anything cuts it to length: a key cut in half is no
longer found by a search for the key, and half a key is still a secret. A server that echoes
a key may wrap it onto two lines, so whitespace between its characters is matched too, and a
piece of the key long enough to matter (`FRAGMENT_CHARS`) is masked on its own.
"""

import re
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

MASK = "***"
# A run of this many characters of a key is masked even when the rest is not there.
FRAGMENT_CHARS = 12
# Secrets shorter than this are not searched for in free text (a password "a" would mask
# every letter a); they are still removed from URLs.
_MIN_SECRET_CHARS = 4


def url_without_credentials(url: str) -> str:
    """`url` with any `user:password@` replaced by `***@` (the address itself unchanged)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{MASK}@{host}"))


def url_secrets(url: str) -> list[str]:
    """The user name and password written in `url`, as given and percent-decoded."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    if "@" not in parts.netloc:
        return []
    userinfo = parts.netloc.rsplit("@", 1)[0]
    found = [userinfo, *userinfo.split(":", 1)]
    for value in (parts.username, parts.password):
        if value:
            found.append(value)
    return [s for s in dict.fromkeys(found) if s]


def mask_secrets(text: str, secrets: Iterable[str | None]) -> str:
    """`text` with every secret, a secret broken by whitespace, and long pieces of one masked."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        if len(secret) < _MIN_SECRET_CHARS:
            continue
        spread = r"\s*".join(re.escape(c) for c in secret)
        text = re.sub(spread, MASK, text)
        text = _mask_fragments(text, secret)
    return text


def _mask_fragments(text: str, secret: str) -> str:
    if len(secret) <= FRAGMENT_CHARS:
        return text
    covered = [False] * len(text)
    for start in range(len(secret) - FRAGMENT_CHARS + 1):
        piece = secret[start : start + FRAGMENT_CHARS]
        found = text.find(piece)
        while found != -1:
            covered[found : found + FRAGMENT_CHARS] = [True] * FRAGMENT_CHARS
            found = text.find(piece, found + 1)
    if not any(covered):
        return text
    out: list[str] = []
    for index, char in enumerate(text):
        if not covered[index]:
            out.append(char)
        elif index == 0 or not covered[index - 1]:
            out.append(MASK)
    return "".join(out)
