"""`rag show`: one document's lineage, from a search hit back to its source version.

Light to import like `rag search`: it loads the model only for `--hit`, never Dagster.
"""

import json
from typing import TYPE_CHECKING, Any

import click

from rag_pipeline.cli.common import cli_settings, errors_as_messages

if TYPE_CHECKING:
    from rag_pipeline.core.version_diff import VersionDiff


def register(main: click.Group) -> None:
    """Add the commands of this module to `rag`."""
    main.add_command(show)


@click.command()
@click.argument("target", required=False)
@click.option("--source", "source_type", help="The source type, where a source id is ambiguous.")
@click.option("--lang", "language", help="The language, where a source id is ambiguous.")
@click.option(
    "--hit",
    type=click.IntRange(min=1, max=100),
    help='Show the document of the Nth hit of a search: `rag show --hit 1 "query"`.',
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--diff", is_flag=True, help="What changed since the previous kept version.")
@click.option("--against", type=int, help="With --diff: compare with this kept version.")
def show(
    target: str | None,
    source_type: str | None,
    language: str | None,
    hit: int | None,
    as_json: bool,
    diff: bool,
    against: int | None,
) -> None:
    """Show a document's lineage: source version, partitions, every stage and run, chunks.

    TARGET is a document id, a chunk or section id, or a source id (with --source and --lang
    where several sources or languages have it); with --hit N it is a search query. With
    --diff, the sections added, removed and changed since an earlier version and which chunks
    were re-embedded. RAG_DAGSTER_UI_URL adds each run's page in the Dagster UI.
    """
    from rag_pipeline.store import lineage
    from rag_pipeline.store.connection import connect
    from rag_pipeline.store.runtime import ready_conninfo

    if not target:
        raise click.UsageError("give a TARGET (a document, chunk or source id, or a query)")
    if against is not None and not diff:
        raise click.UsageError("--against needs --diff")
    settings = cli_settings()
    with errors_as_messages():
        if hit is not None:
            target = _hit_document(target, hit)
        with connect(ready_conninfo(settings)) as conn:
            try:
                document_id = lineage.resolve(
                    conn, target, source_type=source_type, language=language
                )
                if diff:
                    _print_diff(lineage.version_diff(conn, document_id, against), as_json)
                    return
                report = lineage.lineage_json(conn, document_id, ui_url=settings.dagster_ui_url)
            except lineage.UnknownDocumentError as exc:
                raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(report, ensure_ascii=False, indent=2, default=str))
    else:
        _print_report(report)


def _hit_document(query: str, n: int) -> str:
    from rag_pipeline.search import Searcher

    hits = Searcher(cli_settings()).search(query, top_k=n)
    if len(hits) < n:
        raise click.ClickException(f"the search gave {len(hits)} hits, not {n}: {query!r}")
    return hits[n - 1].document_id


def _print_report(report: dict[str, Any]) -> None:
    doc = report["document"]
    click.echo(f"{doc['title']}  [{doc['source_type']}] {doc['source_id']} ({doc['language']})")
    for label, value in (
        ("document id", doc["id"]),
        ("url", doc["url"]),
        ("partitions", ", ".join(doc["partitions"]) or "(none)"),
        ("source version", doc["source_version"]),
        ("fetched", doc["fetched_at"] or "?"),
        ("indexed", doc["ingested_at"]),
        ("model", doc["model_id"]),
    ):
        click.echo(f"  {label + ':':<16}{value}")
    click.echo("\nstages:")
    for s in report["stages"]:
        if s["status"] == "failed":
            click.echo(f"  {s['stage']:<11}FAILED  run {s['run_id']}  {s['at']}: {s['reason']}")
            continue
        click.echo(
            f"  {s['stage']:<11}code {s.get('code_version') or '?'}  "
            f"in {str(s.get('input_hash'))[:12]}  out {str(s.get('output_hash'))[:12]}  "
            f"run {s.get('run_id') or '?'}  {s.get('at')}"
        )
        if s.get("run_url"):
            click.echo(f"  {'':<11}{s['run_url']}")
    chunks_by_section: dict[str, list[dict[str, Any]]] = {}
    for c in report["chunks"]:
        chunks_by_section.setdefault(c["section_id"], []).append(c)
    click.echo(f"\nsections ({len(report['sections'])}) and chunks ({len(report['chunks'])}):")
    for section in report["sections"]:
        path = " › ".join(section["heading_path"]) or section["title"] or "(untitled)"
        click.echo(f"  §{section['ordinal']} {path}  ({section['tokens']} tokens)")
        for c in chunks_by_section.get(section["id"], []):
            click.echo(f"      chunk {c['ordinal']}: {c['token_count']} tokens, {c['vector']}")
    click.echo("\nversions:")
    for v in report["versions"]:
        mark = "  (current)" if v["current"] else ""
        click.echo(
            f"  v{v['version']}  {v['at']}  source {v['source_version']}  "
            f"run {v['run_id'] or '?'}{mark}"
        )


def _print_diff(changes: "VersionDiff", as_json: bool) -> None:
    from dataclasses import asdict

    if as_json:
        click.echo(json.dumps(asdict(changes), ensure_ascii=False, indent=2))
        return
    click.echo(f"v{changes.old} → v{changes.new}")
    if not changes.sections:
        click.echo("  no section changed")
    for section in changes.sections:
        click.echo(f"  {section.change}: {section.name}")
    click.echo(
        f"  chunks: {changes.chunks_unchanged} unchanged, {changes.chunks_reembedded} "
        f"re-embedded, {changes.chunks_reused} reused from the cache, "
        f"{changes.chunks_removed} removed"
    )
    for section in changes.sections:
        click.echo("")
        click.echo(section.diff.rstrip("\n"))
