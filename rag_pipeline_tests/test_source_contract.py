"""The source contract: a complete toy source in about 60 lines, on the shared pipeline."""

import json
from collections.abc import Iterator, Sequence

import dagster as dg
import pytest

from rag_pipeline.core.models import FailedDocument, SourceFormat
from rag_pipeline.core.source import DocumentRef, Source, SourceDocument
from rag_pipeline.defs.resources import resources
from rag_pipeline.orchestration.checks import FAILED_DOCUMENTS, NO_EDITORJS_SYNTAX
from rag_pipeline.orchestration.pipeline import SourceResource, source_definitions
from rag_pipeline.orchestration.source_registry import SourceSpec
from rag_pipeline.search import Searcher
from rag_pipeline.settings import Settings
from rag_pipeline.store.connection import connect

pytestmark = pytest.mark.integration

# The toy source: "shelves" of articles held in memory; an article may stand on two shelves.
SHELVES: dict[str, dict[str, str]] = {}


def editorjs(*paragraphs: str) -> str:
    blocks = [{"type": "paragraph", "data": {"text": text}} for text in paragraphs]
    return json.dumps({"blocks": blocks})


class ShelfSource(Source):
    source_type = "toy"

    def list_documents(self, partition_key: str) -> Iterator[DocumentRef | FailedDocument]:
        for article_id, body in SHELVES[partition_key].items():
            yield DocumentRef(article_id, "en_US", version=str(hash(body)), locator=partition_key)

    def fetch(self, refs: Sequence[DocumentRef]) -> Iterator[SourceDocument | FailedDocument]:
        for ref in refs:
            yield SourceDocument(
                source_id=ref.source_id,
                language=ref.language,
                version=ref.version,
                title=f"Article {ref.source_id}",
                original_format=SourceFormat.EDITORJS,
                body=SHELVES[ref.locator][ref.source_id],
                breadcrumb=f"Shelf {ref.locator}",
            )


class ShelfResource(SourceResource):
    def build(self) -> Source:
        return ShelfSource()

    def partition_keys(self) -> list[str]:
        return sorted(SHELVES)


# Its one declaration (in the registry, `SOURCES`, for a real source): every name derives from it.
TOY_SPEC = SourceSpec("toy", "shelves", "The shelves of toy articles.")
SHELF_PARTITIONS = dg.StaticPartitionsDefinition(["one", "two"])
TOY = dg.Definitions.merge(
    resources(),
    source_definitions(
        TOY_SPEC, partitions_def=SHELF_PARTITIONS, resource=ShelfResource(), description="Toys."
    ),
)
# --- end of the toy source: everything below is the test ---------------------------------


def _run(instance: dg.DagsterInstance, shelf: str) -> dg.ExecuteInProcessResult:
    job = TOY.resolve_job_def(TOY_SPEC.ingest_job)
    result = job.execute_in_process(instance=instance, partition_key=shelf)
    assert result.success
    return result


def _indexed(database_url: str) -> list[str]:
    with connect(database_url) as conn:
        rows = conn.execute("SELECT source_id FROM rag.documents ORDER BY 1").fetchall()
    return [r[0] for r in rows]


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    SHELVES.clear()
    with dg.instance_for_test() as test_instance:
        yield test_instance


def test_one_rejected_document_never_stalls_the_partition(
    rag_env: Settings, database_url: str, instance: dg.DagsterInstance, embedder: object
) -> None:
    SHELVES["one"] = {
        f"a{i}": editorjs(f"Article {i} explains warehouse topic {i}.") for i in range(8)
    }
    # Prose about Editor.js itself is text like any other ...
    SHELVES["one"]["about"] = editorjs(
        'A field "data": holds the payload and "blocks": lists them,'
        ' as <code>"type":</code> names it.'
    )
    # ... but JSON structure left in the converted text is a leak: this one document is rejected.
    SHELVES["one"]["leak"] = editorjs('{"type": "paragraph", "data": {"text": "raw JSON"}}')
    result = _run(instance, "one")

    assert _indexed(database_url) == sorted([*(f"a{i}" for i in range(8)), "about"])
    # Every downstream stage ran for the partition.
    for stage in ("raw", "markdown", "sanitized", "chunks", "embeddings"):
        assert result.asset_materializations_for_node(f"toy__{stage}")
    evaluations = {c.check_name: c for c in result.get_asset_check_evaluations()}
    check = evaluations[NO_EDITORJS_SYNTAX]
    assert not check.passed
    assert check.severity == dg.AssetCheckSeverity.WARN
    assert check.metadata["documents_rejected"].value == 1
    assert check.partition == "one"
    # The rule's check is a check of its own: run alone (as from the UI), it judges again.
    rule_key = dg.AssetCheckKey(TOY_SPEC.asset_key("markdown"), NO_EDITORJS_SYNTAX)
    job = TOY.resolve_job_def(TOY_SPEC.ingest_job)
    alone = job.get_subset(asset_selection=set(), asset_check_selection={rule_key})
    again = alone.execute_in_process(instance=instance, partition_key="one")
    assert not again.asset_materializations_for_node("toy__markdown")
    [rerun] = again.get_asset_check_evaluations()
    assert (rerun.passed, rerun.partition) == (False, "one")
    assert rerun.description is not None
    assert rerun.description.startswith("toy/one: 1 documents rejected; first: leak@en_US")
    # The partition's own verdict names the partition and the document, with its reason.
    failed = evaluations[FAILED_DOCUMENTS]
    assert (failed.passed, failed.severity, failed.partition) == (
        False,
        dg.AssetCheckSeverity.WARN,
        "one",
    )
    assert failed.metadata["documents_failed"].value == 1
    assert failed.description is not None
    assert failed.description.startswith("toy/one: 1 documents failed")
    assert "leak@en_US (markdown): no_editorjs_syntax" in failed.description
    with connect(database_url) as conn:
        errors = conn.execute("SELECT source_id, stage, reason FROM rag.ingest_errors").fetchall()
    assert [(e[0], e[1]) for e in errors] == [("leak@en_US", "markdown")]
    assert "Editor.js JSON" in errors[0][2]
    hits = Searcher(rag_env, embedder=embedder).search('what does the "data": field hold', top_k=3)  # type: ignore[arg-type]
    assert "about" in [hit.source_id for hit in hits]


def test_a_document_on_two_shelves_is_stored_once_and_moves_with_its_shelves(
    rag_env: Settings, database_url: str, instance: dg.DagsterInstance
) -> None:
    shared = editorjs("Locators are shelves inside a warehouse.")
    SHELVES["one"] = {"shared": shared, "only-one": editorjs("Only on shelf one.")}
    SHELVES["two"] = {"shared": shared}
    _run(instance, "one")
    second = _run(instance, "two")
    assert _indexed(database_url) == ["only-one", "shared"]
    (embedded,) = second.asset_materializations_for_node("toy__embeddings")
    assert embedded.metadata["chunks_embedded"].value == 0  # shelf one already did the work

    # It leaves shelf one: shelf two still lists it, so it stays; then it leaves both.
    SHELVES["one"] = {"only-one": SHELVES["one"]["only-one"]}
    _run(instance, "one")
    assert _indexed(database_url) == ["only-one", "shared"]
    SHELVES["two"] = {}
    _run(instance, "two")
    assert _indexed(database_url) == ["only-one"]
