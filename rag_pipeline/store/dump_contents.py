r"""What a dump may hold: only the statements pg_dump writes for the rag schema itself.

A dump is SQL: whatever it holds runs at restore, with the restoring role's rights (on the
embedded server, the superuser's: `COPY ... TO PROGRAM` runs a shell command), and a function,
view or trigger it creates runs again whenever the restored database is used. So a dump is
read in full before anything is applied, and refused unless it is made of nothing but

- the statements pg_dump writes for a database holding our schema at some version (built by
  `Allowlist.from_dumps` from dumps of databases the migrations made, on the same server),
  each word for word, the vector column's dimension aside;
- COPY data for the schema's own tables, and `setval` of its own sequences;
- privileges on the schema, its tables and sequences granted to (or revoked from) roles;
- pg_dump's `\restrict KEY` line first and `\unrestrict KEY` last, comments and blank lines.

Comments and blank lines are skipped, not applied: what reaches the server is rebuilt from the
checked statements and data alone. A custom archive is read as the SQL script pg_restore
prints for it (the same text pg_restore would send), so both formats pass the same check.

Decision: statements are matched whole against known ones instead of being parsed. A parser
of hostile SQL that disagreed with the server's (or psql's) about where a string or statement
ends would let a statement through unseen; known text cannot be misread. The price is that a
dump whose server prints a definition differently (another major version deparsing a
default) is refused, naming the object.
"""

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol


class BackupError(RuntimeError):
    """A pg_dump / pg_restore call failed, or a dump is refused; the message says why."""


_RESTRICT = re.compile(rb"^\\restrict ([A-Za-z0-9]+)$")
_UNRESTRICT = re.compile(rb"^\\unrestrict ([A-Za-z0-9]+)$")
_SETVAL = re.compile(
    rb"^SELECT pg_catalog\.setval\('rag\.([a-z0-9_]+)', [0-9]+, (?:true|false)\);$"
)
# pg_dump's form of an ACL entry; a privilege is data access, never code.
_GRANT = re.compile(
    rb"^(?:GRANT [A-Z ,]+ ON (?:SCHEMA rag|(?:TABLE|SEQUENCE) rag\.([a-z0-9_]+)) TO "
    rb"|REVOKE [A-Z ,]+ ON (?:SCHEMA rag|(?:TABLE|SEQUENCE) rag\.([a-z0-9_]+)) FROM )"
    rb"(?:PUBLIC|[a-z_][a-z0-9_]*|\"[A-Za-z0-9_ .@-]+\")(?: WITH GRANT OPTION)?;$"
)
_SEQUENCE = re.compile(rb"^CREATE SEQUENCE rag\.([a-z0-9_]+)$", re.MULTILINE)
_COPY = re.compile(rb"^COPY (rag\.[a-z0-9_]+) \([^;]*\) FROM stdin;$")
_DOLLAR_TAG = re.compile(rb"\$[A-Za-z_]*\$")
# The vector column's type carries the model's dimension (store/migrations ensure_model).
_DIMENSION = re.compile(rb"public\.vector\([0-9]+\)")
_CREATED = re.compile(
    r"^CREATE\s+(?:OR\s+REPLACE\s+)?(?:(?:UNIQUE|UNLOGGED|TEMP|TEMPORARY|CONSTRAINT|TRUSTED"
    r"|PROCEDURAL)\s+)*(MATERIALIZED\s+VIEW|EVENT\s+TRIGGER|FOREIGN\s+TABLE|[A-Z]+)\s+"
    r"(?:IF\s+NOT\s+EXISTS\s+)?([^\s(;]+(?:\([^)]*\))?)",
    re.IGNORECASE,
)


def _normal(line: bytes) -> bytes:
    return _DIMENSION.sub(b"public.vector", line)


@dataclass(frozen=True)
class Allowlist:
    """The statements a dump of our schema can hold, as tuples of lines."""

    # First line → every known statement starting with it.
    statements: dict[bytes, tuple[tuple[bytes, ...], ...]]
    copies: dict[bytes, str]  # the COPY line → its table
    sequences: frozenset[bytes]

    @property
    def relations(self) -> frozenset[bytes]:
        """The names (without `rag.`) of the schema's tables and sequences."""
        tables = {table.removeprefix("rag.").encode() for table in self.copies.values()}
        return self.sequences | tables

    @classmethod
    def from_dumps(cls, dumps: Iterable[bytes]) -> "Allowlist":
        """Every statement of these plain dumps (trusted: made by pg_dump of our schema)."""
        statements: dict[bytes, set[tuple[bytes, ...]]] = {}
        copies: dict[bytes, str] = {}
        sequences: set[bytes] = set()
        for text in dumps:
            for statement in split_statements(text):
                lines = tuple(_normal(line) for line in statement.split(b"\n"))
                copy = _COPY.match(lines[0])
                if copy and len(lines) == 1:
                    copies[lines[0]] = copy[1].decode()
                elif not _SETVAL.match(lines[0]):
                    statements.setdefault(lines[0], set()).add(lines)
            sequences.update(_SEQUENCE.findall(text))
        return cls(
            {first: tuple(sorted(known)) for first, known in statements.items()},
            copies,
            frozenset(sequences),
        )


def split_statements(text: bytes) -> Iterator[bytes]:
    """The SQL statements of pg_dump's own output, each from its first character to its `;`.

    Only for trusted text: quotes, dollar quotes and comments are followed as pg_dump writes
    them; psql meta-command lines (`\\restrict`) and COPY data are skipped.
    """
    index, size = 0, len(text)
    start: int | None = None
    while index < size:
        char = text[index : index + 1]
        if start is None:
            if char.isspace():
                index += 1
                continue
            if text.startswith(b"--", index) or char == b"\\":
                index = _line_end(text, index)
                continue
            start = index
        if char == b"'" or char == b'"':
            index = text.index(char, index + 1) + 1
            while text[index : index + 1] == char:  # a doubled quote inside
                index = text.index(char, index + 1) + 1
        elif char == b"$" and (tag := _DOLLAR_TAG.match(text, index)):
            index = text.index(tag[0], index + len(tag[0])) + len(tag[0])
        elif text.startswith(b"--", index):
            index = _line_end(text, index)
        elif char == b";":
            statement = text[start : index + 1]
            yield statement
            index, start = index + 1, None
            if _COPY.match(statement):  # its data follows, up to a `\.` line
                index = text.index(b"\n\\.\n", index) + 3
        else:
            index += 1


def _line_end(text: bytes, index: int) -> int:
    end = text.find(b"\n", index)
    return len(text) if end < 0 else end


class Loader(Protocol):
    """Where the checked statements and data go (nothing, while only checking)."""

    def statement(self, text: bytes) -> None: ...
    def copy_begin(self, text: bytes) -> None: ...
    def copy_data(self, line: bytes) -> None: ...
    def copy_end(self) -> None: ...


@dataclass
class DumpContents:
    """What a checked dump holds."""

    rows: dict[str, int] = field(default_factory=dict)  # COPY data rows per table
    has_rag_schema: bool = False


@dataclass
class _Statement:
    number: int  # its first line's
    lines: list[bytes]
    candidates: tuple[tuple[bytes, ...], ...]


def scan(
    lines: Iterable[bytes],
    allowed: Allowlist,
    where: str,
    loader: Loader | None = None,
    *,
    numbered: bool = True,
) -> DumpContents:
    r"""Check a plain dump line by line; hand every checked statement and data to `loader`.

    Args:
        lines: The dump's lines, each with its `\n` (split on `\n` only, as psql does).
        allowed: What the dump may hold.
        where: The dump's name in messages.
        numbered: Name the line in messages (not for pg_restore's script of an archive).
        loader: Receives each statement once it is complete and known, COPY data line by line.

    Raises:
        BackupError: The dump holds something else, or is truncated; one line naming it.
    """
    scanner = _Scanner(allowed, where, loader, numbered)
    for number, raw in enumerate(lines, 1):
        scanner.read(number, raw)
    return scanner.finish()


@dataclass
class _Scanner:
    """Where `scan` is in a dump: before `\\restrict`, in COPY data, in a statement, or after."""

    allowed: Allowlist
    where: str
    loader: Loader | None
    numbered: bool
    contents: DumpContents = field(default_factory=DumpContents)
    key: bytes | None = None  # the \restrict line's, once read
    ended: bool = False  # the matching \unrestrict line was read
    copying: str | None = None  # the table whose COPY data is being read
    pending: _Statement | None = None  # a known statement not yet at its last line

    def place(self, number: int) -> str:
        return f"{self.where} line {number}" if self.numbered else self.where

    def read(self, number: int, raw: bytes) -> None:
        """Check one line of the dump and hand what it completes to the loader."""
        if b"\r" in raw or b"\0" in raw:
            # pg_dump escapes both in data; raw, they split lines differently for psql.
            raise _refused(
                self.place(number), "a carriage return or NUL byte (pg_dump writes none)"
            )
        line = raw.removesuffix(b"\n")
        if line == raw and not _UNRESTRICT.match(line):  # the last line, cut short
            raise _truncated(self.where)
        if self.copying is not None:
            self._copy_data(self.copying, line)
            return
        if self.pending is not None:
            self.pending = _continue(self.pending, line, self.place, self.loader)
            return
        if not line.strip() or line.startswith(b"--"):
            return
        if self.key is None:
            self._opening(number, line)
            return
        if self.ended:
            raise _refused(self.place(number), "more after its \\unrestrict line")
        if line.startswith(b"\\"):
            self._meta_command(number, line)
            return
        self._statement(number, line)

    def finish(self) -> DumpContents:
        """What the dump held, once it ended where a whole dump ends."""
        unfinished = self.copying is not None or self.pending is not None
        if self.key is None or not self.ended or unfinished:
            raise _truncated(self.where)
        return self.contents

    def _copy_data(self, table: str, line: bytes) -> None:
        if line == b"\\.":
            self.copying = None
            if self.loader:
                self.loader.copy_end()
        else:
            self.contents.rows[table] += 1
            if self.loader:
                self.loader.copy_data(line + b"\n")

    def _opening(self, number: int, line: bytes) -> None:
        """The first line that is not blank or a comment: pg_dump's `\\restrict` line."""
        if match := _RESTRICT.match(line):
            self.key = match[1]
            return
        if line.startswith(b"\\"):
            meta = line.split()[0].decode(errors="replace")
            raise _refused(self.place(number), f"a psql meta-command ({meta}) before \\restrict")
        raise BackupError(
            f"{self.where} is not a plain dump of pg_dump 17.6 or later: it does not start "
            "with its \\restrict line (restore only dumps made by `rag backup`)"
        )

    def _meta_command(self, number: int, line: bytes) -> None:
        """Only the `\\unrestrict` line matching `\\restrict`, which ends the dump."""
        match = _UNRESTRICT.match(line)
        if match and match[1] == self.key:
            self.ended = True
            return
        meta = line.split()[0].decode(errors="replace")
        raise _refused(self.place(number), f"a psql meta-command ({meta})")

    def _statement(self, number: int, line: bytes) -> None:
        """The first line of a COPY, a `setval`, a privilege or a known statement."""
        allowed, loader, place = self.allowed, self.loader, self.place
        normal = _normal(line)
        if table := allowed.copies.get(normal):
            self.copying = table
            self.contents.rows.setdefault(table, 0)
            if loader:
                loader.copy_begin(line)
        elif setval := _SETVAL.match(line):
            if setval[1] not in allowed.sequences:
                raise _refused(place(number), f"SEQUENCE rag.{setval[1].decode()}", own=False)
            if loader:
                loader.statement(line)
        elif grant := _GRANT.match(line):
            table = grant[1] or grant[2]
            if table is not None and table not in allowed.relations:
                raise _refused(place(number), f"`{line[:100].decode()}`", own=False)
            if loader:
                loader.statement(line)
        elif candidates := allowed.statements.get(normal):
            self.contents.has_rag_schema |= line == b"CREATE SCHEMA rag;"
            self.pending = _continue(_Statement(number, [], candidates), line, place, loader)
        else:
            raise _refused(place(number), _describe(line), own=False)


def _truncated(where: str) -> BackupError:
    return BackupError(
        f"{where} is truncated or damaged: it does not end with the \\unrestrict line "
        "matching its \\restrict line"
    )


def _continue(
    statement: _Statement, line: bytes, place: Callable[[int], str], loader: Loader | None
) -> _Statement | None:
    """Add a line to a statement being read; None once it is complete (and loaded)."""
    position, normal = len(statement.lines), _normal(line)
    candidates = tuple(
        c for c in statement.candidates if len(c) > position and c[position] == normal
    )
    statement.lines.append(line)
    if not candidates:
        opening = statement.lines[0]
        raise _refused(place(statement.number), _describe(opening), own=True)
    if any(len(c) == position + 1 for c in candidates):
        # No known statement is a prefix of another: each ends at its own `;`.
        if loader:
            loader.statement(b"\n".join(statement.lines))
        return None
    statement.candidates = candidates
    return statement


def _describe(line: bytes) -> str:
    """The object a statement creates ("FUNCTION rag.evil()"), else its opening words."""
    text = line.decode(errors="replace")
    match = _CREATED.match(text)
    if match and ";" not in text.rstrip().removesuffix(";"):  # not `CREATE ...; more`
        return f"{' '.join(match[1].upper().split())} {match[2]}"
    return f"the statement `{text[:100]}`"


def _refused(where: str, what: str, own: bool | None = None) -> BackupError:
    if own is True:
        what = f"{what}, changed from the rag schema's own"
    elif own is False:
        what = f"{what}, which the rag schema does not have"
    return BackupError(f"{where}: the dump holds {what}: refused before anything was restored")
