"""The dump check alone: what passes, what is refused, what a loader receives (no server)."""

import io

import pytest

from rag_pipeline.store.dump_contents import Allowlist, BackupError, scan, split_statements

pytestmark = pytest.mark.unit

KEY = "Abc123"
# Shaped like pg_dump's output of our schema: a function body holding `;` and blank lines.
REFERENCE = f"""--
-- PostgreSQL database dump
--

\\restrict {KEY}

SET statement_timeout = 0;
SELECT pg_catalog.set_config('search_path', '', false);

CREATE SCHEMA rag;

CREATE FUNCTION rag.keyword_text(body text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
    SELECT translate(body, '/;', '  ');

$$;

CREATE TABLE rag.chunks (
    id text NOT NULL,
    embedding public.vector(384) NOT NULL
);

CREATE SEQUENCE rag.chunks_generation
    START WITH 1;

COPY rag.chunks (id, embedding) FROM stdin;
a	[1,2]
\\.

SELECT pg_catalog.setval('rag.chunks_generation', 1, false);

\\unrestrict {KEY}
"""


class Recorder:
    """A loader that keeps what it is given."""

    def __init__(self) -> None:
        self.received: list[tuple[str, bytes]] = []

    def statement(self, text: bytes) -> None:
        self.received.append(("statement", text))

    def copy_begin(self, text: bytes) -> None:
        self.received.append(("copy", text))

    def copy_data(self, line: bytes) -> None:
        self.received.append(("data", line))

    def copy_end(self) -> None:
        self.received.append(("end", b""))


@pytest.fixture
def allowed() -> Allowlist:
    return Allowlist.from_dumps([REFERENCE.encode()])


def _scan(text: str, allowed: Allowlist, loader: Recorder | None = None):  # type: ignore[no-untyped-def]
    return scan(io.BytesIO(text.encode()).readlines(), allowed, "kb.sql", loader)


def test_the_reference_splits_into_its_statements() -> None:
    statements = [s.decode().split("\n")[0] for s in split_statements(REFERENCE.encode())]
    assert statements == [
        "SET statement_timeout = 0;",
        "SELECT pg_catalog.set_config('search_path', '', false);",
        "CREATE SCHEMA rag;",
        "CREATE FUNCTION rag.keyword_text(body text) RETURNS text",
        "CREATE TABLE rag.chunks (",
        "CREATE SEQUENCE rag.chunks_generation",
        "COPY rag.chunks (id, embedding) FROM stdin;",
        "SELECT pg_catalog.setval('rag.chunks_generation', 1, false);",
    ]


def test_a_dump_of_the_schema_passes_and_the_loader_gets_only_statements_and_data(
    allowed: Allowlist,
) -> None:
    # Another model's dimension, another sequence value, two more rows.
    text = (
        REFERENCE.replace("vector(384)", "vector(768)")
        .replace("', 1, false)", "', 42, true)")
        .replace("a\t[1,2]\n", "a\t[1,2]\nb\t[3,4]\nc\t[5,6]\n")
    )
    recorder = Recorder()
    contents = _scan(text, allowed, recorder)
    assert contents.rows == {"rag.chunks": 3}
    assert contents.has_rag_schema
    kinds = [kind for kind, _ in recorder.received]
    assert kinds == ["statement"] * 6 + ["copy", "data", "data", "data", "end", "statement"]
    function = recorder.received[3][1].decode()
    assert function.startswith("CREATE FUNCTION")
    assert function.endswith("$$;")
    assert "vector(768)" in recorder.received[4][1].decode()  # sent as written
    assert not any(text.startswith((b"--", b"\\")) for _, text in recorder.received)


@pytest.mark.parametrize(
    ("old", "new", "named"),
    [
        (
            "CREATE SCHEMA rag;\n",
            "CREATE SCHEMA rag;\nCOPY (SELECT 1) TO PROGRAM 'id';\n",
            "the statement `COPY (SELECT 1) TO PROGRAM 'id';`, which the rag schema does not",
        ),
        (
            "CREATE SCHEMA rag;\n",
            "CREATE SCHEMA rag; SELECT 1;\n",
            "the statement `CREATE SCHEMA rag; SELECT 1;`, which",
        ),
        (
            "    SELECT translate(body, '/;', '  ');\n",
            "    COPY (SELECT 1) TO PROGRAM 'id';\n",
            "line 12: the dump holds FUNCTION rag.keyword_text(body text), changed from the rag",
        ),
        (
            "CREATE SCHEMA rag;\n",
            "CREATE SCHEMA rag;\nCREATE VIEW rag.v AS SELECT 1;\n",
            "VIEW rag.v, which the rag schema does not have",
        ),
        ("a\t[1,2]\n\\.\n", "a\t[1,2]\n\\.\r\nSELECT 1;\n\\.\n", "carriage return"),
        ("CREATE SCHEMA rag;\n", "CREATE SCHEMA rag;\n\\! id\n", "psql meta-command (\\!)"),
        (
            f"\\unrestrict {KEY}\n",
            f"\\unrestrict {KEY}\nSELECT 1 \\! id\n",
            "more after its \\unrestrict line",
        ),
        ("rag.chunks_generation', 1", "rag.other_seq', 1", "SEQUENCE rag.other_seq"),
        ("COPY rag.chunks (id, embedding)", "COPY rag.chunks (id)", "the statement `COPY"),
    ],
)
def test_anything_else_is_refused_naming_it(
    allowed: Allowlist, old: str, new: str, named: str
) -> None:
    assert old in REFERENCE
    recorder = Recorder()
    with pytest.raises(BackupError, match="refused before anything was restored") as refused:
        _scan(REFERENCE.replace(old, new, 1), allowed, recorder)
    assert named in str(refused.value)
    assert "\n" not in str(refused.value)


def test_a_meta_command_before_the_restrict_line_is_refused(allowed: Allowlist) -> None:
    with pytest.raises(BackupError, match=r"psql meta-command \(\\!\) before \\restrict"):
        _scan("--\n\\! id\n" + REFERENCE, allowed)


@pytest.mark.parametrize("cut", ["a\t[1,2]\n", "    AS $$\n", "SELECT pg_catalog.setval"])
def test_a_truncated_dump_is_refused(allowed: Allowlist, cut: str) -> None:
    with pytest.raises(BackupError, match="truncated"):
        _scan(REFERENCE[: REFERENCE.index(cut) + len(cut)], allowed)


def test_a_dump_without_the_schema_says_so(allowed: Allowlist) -> None:
    text = f"\\restrict {KEY}\nSET statement_timeout = 0;\n\\unrestrict {KEY}\n"
    assert not _scan(text, allowed).has_rag_schema


def test_grants_on_the_schemas_tables_pass_others_do_not(allowed: Allowlist) -> None:
    grant = "GRANT SELECT ON TABLE rag.chunks TO reader;\n"
    _scan(REFERENCE.replace("CREATE SCHEMA rag;\n", f"CREATE SCHEMA rag;\n{grant}"), allowed)
    other = "GRANT SELECT ON TABLE rag.secrets TO reader;\n"
    with pytest.raises(BackupError, match=r"rag\.secrets"):
        _scan(REFERENCE.replace("CREATE SCHEMA rag;\n", f"CREATE SCHEMA rag;\n{other}"), allowed)
