"""Stored text survives pg_dump → pg_restore/psql byte for byte (seed ADR-067's real goal).

Hostile strings go through the real ingestion path into the real database; the real binaries
dump it in plain and custom formats; each dump is restored into a new database and every
stored text and every search result must be identical.
"""

import json
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from click.testing import CliRunner

from rag_pipeline.cli import main
from rag_pipeline.core.embedding import Embedder
from rag_pipeline.core.sanitize import find_forbidden
from rag_pipeline.search import Searcher
from rag_pipeline.settings import Settings
from rag_pipeline.store import backup
from rag_pipeline.store.connection import connect
from rag_pipeline_tests.pipeline_helpers import ingest, write

pytestmark = pytest.mark.integration

C0 = "".join(chr(c) for c in range(0x20) if c not in (0x0A,))
C1 = "".join(chr(c) for c in range(0x7F, 0xA0))
HOSTILE = [
    f"controls {C0} and {C1} end",
    "NUL in the middle\x00of a line",
    "backslashes \\ \\\\ \\n \\t and a COPY terminator:\n\\.\nafter it",
    "quotes ' \" ` and 'unclosed \"quotes",
    "tabs\tin\tCOPY\tpositions\t",
    "emoji 🧾📦 and a ZWJ family 👨‍👩‍👧 and flags 🇸🇰🇭🇺",
    "RTL marks \u200f\u200e and Arabic مرحبا and Hebrew שלום",
    "percent 50% off, 100%, a+b, %ZZ, and a link [doc](http://x.org/a%20b)",
    "CRLF line\r\nand CR\rline",
    "combining e\u0301 vs é (NFC)",
]

SELECTS = {
    "documents": "SELECT id, title, breadcrumb, url, body, metadata::text FROM rag.documents",
    "sections": "SELECT id, title, heading_path, text FROM rag.sections",
    "chunks": "SELECT id, heading, text, embedded_text, embedding::text, tsv::text FROM rag.chunks",
    "stages": "SELECT asset_key, doc_key, meta::text, body FROM rag.stage_documents",
    "cache": "SELECT model_id, text_sha256, embedding::text FROM rag.embedding_cache",
}


def _hostile_corpus(folder: Path, shared_fixtures: Path) -> None:
    for index, text in enumerate(HOSTILE):
        write(folder, f"hostile-{index:02}.md", f"# Hostile {index}\n\n{text}\n")
    write(folder, "long-line.txt", "word " * 200_000)  # a 1 MB line
    # JSON can carry what UTF-8 files cannot: lone surrogates and NUL as escapes.
    write(
        folder,
        "escapes.json",
        json.dumps(
            {
                "blocks": [
                    {"type": "header", "data": {"text": "Escapes", "level": 1}},
                    {"type": "paragraph", "data": {"text": "lone \ud800 surrogate, NUL \x00 end"}},
                ]
            }
        ),
    )
    for source in sorted((shared_fixtures / "editorjs" / "real_documents").glob("*.json")):
        write(folder, f"editorjs/{source.name}", source.read_bytes())
    for source in sorted(Path(__file__).parent.glob("fixtures/normalize/html/*.html")):
        write(folder, f"html/{source.name}", source.read_bytes())


def _snapshot(conninfo: str) -> dict[str, list[tuple[Any, ...]]]:
    with connect(conninfo) as conn:
        return {
            name: sorted(conn.execute(query).fetchall(), key=repr)
            for name, query in SELECTS.items()
        }


@pytest.mark.parametrize("fmt", ["plain", "custom"])
def test_dump_and_restore_are_byte_identical(
    fmt: str,
    rag_env: Settings,
    database_url: str,
    instance: dg.DagsterInstance,
    embedder: Embedder,
    shared_fixtures: Path,
    tmp_path: Path,
) -> None:
    corpus = tmp_path / "hostile"
    _hostile_corpus(corpus, shared_fixtures)
    stats = ingest(corpus, instance)
    assert stats["documents_failed"] == 0
    before = _snapshot(database_url)
    assert len(before["documents"]) == len(list(corpus.rglob("*.*")))
    for row in before["documents"]:
        assert find_forbidden(row[4]) == [], row[0]

    dump = tmp_path / f"rag.{fmt}"
    backup.dump(database_url, dump, "plain" if fmt == "plain" else "custom")
    with backup.scratch_database(database_url) as restored:
        backup.restore(restored, dump)
        after = _snapshot(restored)
        for table, rows in before.items():
            assert after[table] == rows, table
        queries = ["percent off", "emoji family", "lone surrogate", "Hostile 3 quotes"]
        original = Searcher(rag_env, embedder=embedder)
        copy = Searcher(rag_env, embedder=embedder, conninfo=restored)
        for query in queries:
            expected = [(h.chunk_id, round(h.score, 6)) for h in original.search(query, top_k=5)]
            assert expected
            assert [(h.chunk_id, round(h.score, 6)) for h in copy.search(query, top_k=5)] == (
                expected
            )


def test_backup_command_verifies_its_dump(
    rag_env: Settings, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    write(tmp_path / "kb", "a.md", "# Period control\n\nOpen and close periods.\n")
    ingest(tmp_path / "kb", instance)
    result = CliRunner().invoke(main, ["backup", str(tmp_path / "kb.dump")])
    assert result.exit_code == 0, result.output
    assert "verified: restored into a scratch database" in result.output
    result = CliRunner().invoke(main, ["restore", "-y", str(tmp_path / "kb.dump")])
    assert result.exit_code == 0, result.output
    assert "restored" in result.output


def test_a_damaged_dump_never_touches_the_data(
    rag_env: Settings, database_url: str, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    write(tmp_path / "kb", "a.md", "# Period control\n\nOpen and close periods.\n")
    ingest(tmp_path / "kb", instance)
    before = _snapshot(database_url)
    damaged = tmp_path / "damaged.dump"
    backup.dump(database_url, damaged, "custom")
    damaged.write_bytes(damaged.read_bytes()[: damaged.stat().st_size // 2])
    result = CliRunner().invoke(main, ["restore", "-y", str(damaged)])
    assert result.exit_code == 1
    assert "pg_restore failed" in result.output
    assert _snapshot(database_url) == before
