"""What document history (rag.document_versions) costs on disk, on the demo corpus.

    python benchmarks/history_size.py

In a fresh RAG_HOME (its own embedded PostgreSQL), ingests the bundled demo files and the demo
wiki export through `rag ingest`, edits every document once (a paragraph added to each file and
each wiki page, with a new revision id), then runs three full ingests: the edited corpus, the
same again, and a forced one (`--force`, every stage recomputed). Prints the on-disk size of
the rag schema's tables (with their indexes and TOAST) after a VACUUM FULL, the size of
rag.document_versions, and history's share of the rest (target: at most 20 %).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "rag_pipeline" / "demo"
EDIT = "This paragraph was added by the history benchmark to change every document once."


def _rag(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "rag_pipeline.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise SystemExit(f"rag {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout


def _edit_files(folder: Path) -> None:
    for path in sorted(folder.iterdir()):
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".md":
            text += f"\n\n{EDIT}\n"
        elif path.suffix == ".html":
            text = text.replace("</body>", f"<p>{EDIT}</p></body>")
        elif path.suffix == ".json":
            data = json.loads(text)
            data["blocks"].append({"type": "paragraph", "data": {"text": EDIT}})
            text = json.dumps(data)
        path.write_text(text, encoding="utf-8")


def _edit_wiki(export: Path) -> None:
    text = export.read_text(encoding="utf-8")
    # A new revision of every page: a higher revision id and a paragraph more (not redirects).
    text = re.sub(
        r"(<revision>\s*<id>)(\d+)(</id>)", lambda m: f"{m[1]}{int(m[2]) + 10000}{m[3]}", text
    )
    text = re.sub(
        r"(<text[^>]*>)(?!#REDIRECT)(.*?)(</text>)",
        lambda m: f"{m[1]}{m[2]}\n\n{EDIT}{m[3]}",
        text,
        flags=re.DOTALL,
    )
    export.write_text(text, encoding="utf-8")


def _sizes(env: dict[str, str]) -> tuple[int, int, int, int]:
    """Bytes of every rag table, of rag.document_versions, documents and versions kept."""
    import psycopg

    sys.path.insert(0, str(REPO))
    from rag_pipeline.settings import load_settings
    from rag_pipeline.store.runtime import ready_conninfo

    os.environ.update(env)
    with psycopg.connect(ready_conninfo(load_settings()), autocommit=True) as conn:
        conn.execute("VACUUM FULL")
        row = conn.execute(
            "SELECT sum(pg_total_relation_size(c.oid)),"
            " sum(pg_total_relation_size(c.oid)) FILTER (WHERE c.relname = 'document_versions')"
            " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'rag' AND c.relkind = 'r'"
        ).fetchone()
        counts = conn.execute(
            "SELECT (SELECT count(*) FROM rag.documents),"
            " (SELECT count(*) FROM rag.document_versions)"
        ).fetchone()
    assert row is not None
    assert counts is not None
    return int(row[0]), int(row[1]), int(counts[0]), int(counts[1])


def main() -> None:
    """Run the scenario and print the figures."""
    with tempfile.TemporaryDirectory(prefix="history_size_") as tmp:
        home = Path(tmp) / "home"
        folder = Path(tmp) / "demo-files"
        export = Path(tmp) / "wiki.xml"
        shutil.copytree(DEMO / "files", folder)
        shutil.copy(DEMO / "wiki" / "idempiere-demo-export.xml", export)
        env = {
            **os.environ,
            "RAG_HOME": str(home),
            "PYTHONPATH": str(REPO),
            "DAGSTER_HOME": str(Path(tmp) / "dagster"),
        }
        for variable in ("RAG_VECTORDB_URL", "RAG_VECTORDB_PG_HOST", "RAG_WIKI_API_URL"):
            env.pop(variable, None)
        Path(env["DAGSTER_HOME"]).mkdir()

        def ingest_all(*flags: str) -> None:
            _rag(env, "ingest", "--path", str(folder), *flags)
            _rag(env, "ingest", "--source", "wiki", "--xml", str(export), *flags)

        try:
            ingest_all()
            _edit_files(folder)
            _edit_wiki(export)
            ingest_all()
            ingest_all()
            ingest_all("--force")
            total, history, documents, versions = _sizes(env)
        finally:
            subprocess.run([sys.executable, "-m", "rag_pipeline.cli", "stop"], env=env, check=False)
    rest = total - history
    print(f"{documents} documents, {versions} versions kept")
    print(f"rag schema without history: {rest:,} bytes")
    print(f"rag.document_versions:      {history:,} bytes")
    print(f"history adds {100 * history / rest:.1f} % (target: at most 20 %)")


if __name__ == "__main__":
    main()
