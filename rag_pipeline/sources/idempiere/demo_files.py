"""Where the demo iDempiere content ships, and the fingerprint that says which version it is.

The folder is `rag_pipeline/demo/idempiere/` of the installed package; the fingerprint hashes
every data file in it, so the demo database is reloaded when a newer package changes one.
"""

import hashlib
from functools import cache
from pathlib import Path


def demo_folder() -> Path:
    """The folder of the shipped demo content."""
    return Path(__file__).resolve().parents[2] / "demo" / "idempiere"


@cache
def demo_fingerprint() -> str:
    """A hash of every shipped demo file: a changed file reloads the demo database."""
    digest = hashlib.sha256()
    for path in sorted(demo_folder().rglob("*")):
        # Notes about the data do not change it.
        if path.is_file() and path.suffix not in {".md", ".txt"}:
            digest.update(path.relative_to(demo_folder()).as_posix().encode())
            digest.update(path.read_bytes())
    return f"rag_pipeline idempiere demo {digest.hexdigest()[:16]}"
