"""Configuration is trusted only from its owner (issue 49).

Root running `rag` with a `RAG_HOME` another local user owns would use that user's
`dagster.yaml`, and Dagster turns its logging section into objects (`"()": subprocess.Popen`
runs a command). A `.env` in the current folder could point the API key or the database
password at a listener of someone else's. So:

- `RAG_HOME` and `DAGSTER_HOME` must belong to the user running `rag` and not be writable by
  group or others (`owned_folder`);
- the values of a `.env` that decide where secrets are sent (`ROUTING_FIELDS`) are read only
  from a `.env` of the user's own that others cannot write (`dotenv_is_trusted`).
"""

import os
import pwd
import stat
from pathlib import Path

# Settings fields (lowercase names, or their lowercase aliases) that decide where a password,
# a key or the index goes.
ROUTING_FIELDS = frozenset(
    {
        "home",
        "vectordb_url",
        "vectordb_pg_host",
        "vectordb_pg_port",
        "anthropic_base_url",
        "openai_base_url",
        "idempiere_db_host",
        "idempiere_db_port",
    }
)


class UntrustedConfigError(ValueError):
    """A configuration folder or file another user controls; the message names it and the fix."""


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def untrusted_reason(info: os.stat_result) -> str | None:
    """Why a file or folder with this `stat` is not the running user's alone, or None."""
    if info.st_uid != os.geteuid():
        return f"it belongs to {_user(info.st_uid)}, not to {_user(os.geteuid())}"
    if stat.S_IMODE(info.st_mode) & 0o022:
        return f"others can write it (mode {oct(stat.S_IMODE(info.st_mode))})"
    return None


def owned_folder(path: Path, variable: str, *, repair: bool = True) -> Path:
    """`path` after checking it is the running user's and nobody else can write it.

    A folder of the user's own that others can write is made 0700 if `repair` (for the
    folders `rag` makes); a folder of another user is refused: its files (dagster.yaml above
    all) would be run as this user.

    Raises:
        UntrustedConfigError: The folder belongs to another user, or stays writable by others.
    """
    info = path.stat()
    reason = untrusted_reason(info)
    if reason is not None and repair and info.st_uid == os.geteuid():
        try:
            path.chmod(0o700)
        except OSError:
            pass
        else:
            reason = untrusted_reason(path.stat())
    if reason is not None:
        raise UntrustedConfigError(
            f"{variable} {path} is refused: {reason}; point {variable} at a folder of your own "
            f"(or make this one yours and private: chown {_user(os.geteuid())} {path} && "
            f"chmod 700 {path})"
        )
    return path


def dotenv_is_trusted(path: Path) -> bool:
    """Whether `.env` at `path` (if any) is the user's own and others cannot write it."""
    try:
        info = path.stat()
    except OSError:
        return True  # no file, nothing read from it
    return untrusted_reason(info) is None


def set_in_environment(variable: str) -> bool:
    """Whether `variable` is set in the process environment (read case-insensitively, as the
    settings are): if not, a value differing from the default came from `.env`."""
    wanted = variable.upper()
    return any(name.upper() == wanted for name in os.environ)
