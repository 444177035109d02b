"""Write the labelled set's corpus as a folder of Markdown files for the `files` source.

    python benchmarks/eval/build_corpus.py OUT_DIR [--shared ../shared]
    rag ingest --path OUT_DIR
    rag eval --queries benchmarks/eval/queries.jsonl --qrels benchmarks/eval/qrels.tsv

The corpus: the 47 iDempiere wiki pages of the fixtures (`wiki/<page>.md`, copied as they are:
they may not ship, so they are read from ../shared) and every Application Dictionary window
and process with a name, in English (`ad/window/<id>.md`) and in Spanish (Colombia)
(`ad/window/<id>.es_CO.md`, front matter `language: es_CO`), each rendered as a small page:
name, description, help. qrels.tsv names these relative paths; `rag eval` matches them against
the files source's ids, which end with them.
"""

import argparse
import csv
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_KINDS = (("window", "ad_window", "AD_Window_ID"), ("process", "ad_process", "AD_Process_ID"))


def _rows(path: Path) -> Iterator[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        yield from csv.DictReader(handle)


def _page(title: str, description: str, help_text: str, language: str | None) -> str:
    # JSON strings are valid YAML double-quoted scalars, whatever quotes the name holds.
    front = f"---\ntitle: {json.dumps(title)}\nlanguage: {language}\n---\n\n" if language else ""
    parts = [f"# {title}", description.strip(), help_text.strip()]
    return front + "\n\n".join(p for p in parts if p) + "\n"


def build(out: Path, shared: Path) -> int:
    """Write the corpus under `out`; return the number of files."""
    fixtures = shared / "fixtures"
    written = 0
    wiki = out / "wiki"
    wiki.mkdir(parents=True, exist_ok=True)
    for page in sorted((fixtures / "wiki" / "docs_md").glob("*.md")):
        shutil.copyfile(page, wiki / page.name)
        written += 1
    ad = fixtures / "ad" / "core_es_CO"
    for kind, table, key in _KINDS:
        folder = out / "ad" / kind
        folder.mkdir(parents=True, exist_ok=True)
        english = {row[key]: row for row in _rows(ad / f"{table}.csv") if row.get(key)}
        for ident, row in english.items():
            if (row.get("Name") or "").strip():
                text = _page(row["Name"].strip(), row["Description"] or "", row["Help"] or "", None)
                (folder / f"{ident}.md").write_text(text, encoding="utf-8")
                written += 1
        for row in _rows(ad / f"{table}_trl_es_CO.csv"):
            ident = row.get(key) or ""
            name = (row.get("Name") or "").strip()
            if ident in english and name:
                text = _page(name, row["Description"] or "", row["Help"] or "", "es_CO")
                (folder / f"{ident}.es_CO.md").write_text(text, encoding="utf-8")
                written += 1
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    args = parser.parse_args()
    count = build(args.out, args.shared)
    print(f"wrote {count} files under {args.out}")


if __name__ == "__main__":
    main()
