"""The `wiki` source: partitions, revision-exact listing, fetching, XML import, the demo export."""

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_pipeline.core.http_retry import RetryPolicy
from rag_pipeline.core.models import FailedDocument, SourceFormat
from rag_pipeline.core.normalize import to_markdown
from rag_pipeline.core.source import DocumentRef, SourceDocument
from rag_pipeline.settings import ConfigError, load_settings
from rag_pipeline.sources.wiki.client import MediaWikiClient
from rag_pipeline.sources.wiki.source import (
    DEMO_EXPORT_PARTITION,
    PAGES_PARTITION,
    WikiConfig,
    WikiConfigError,
    WikiSource,
    category_partition_key,
    export_partition_key,
)
from rag_pipeline.sources.wiki.wikitext import wikitext_to_html
from rag_pipeline.sources.wiki.xml_export import ExportError, MalformedPage, read_pages
from rag_pipeline_tests.mediawiki_server import (
    FakeWiki,
    MediaWikiServer,
    rendered_html,
    shared_pages,
    shared_wiki_file,
)

NF = "Category:New_Features"
PLUGINS = "Category:Plug-In_Development"


def shared_wiki() -> FakeWiki:
    """The migrated iDempiere pages of ../shared, NF pages in per-release subcategories."""
    wiki = FakeWiki()
    releases: set[str] = set()
    titles: set[str] = set()
    for page in shared_pages():
        if page.title in titles:
            continue
        titles.add(page.title)
        if page.category.startswith("New Features v") and page.category not in releases:
            releases.add(page.category)
            wiki.add_category(page.category, parents=("New Features",))
        wiki.add_page(page.title, rendered_html(page.markdown), [page.category], log=False)
    return wiki


@pytest.fixture
def server() -> Iterator[MediaWikiServer]:
    with MediaWikiServer(shared_wiki()) as running:
        yield running


def make_source(server: MediaWikiServer, **config: object) -> WikiSource:
    defaults: dict[str, object] = {"categories": ("New_Features", "Plug-In Development")}
    defaults.update(config)
    client = MediaWikiClient(
        server.api_url, retry=RetryPolicy(attempts=2, base_delay=0), sleep=lambda _: None
    )
    return WikiSource(WikiConfig(api_url=server.api_url, **defaults), client=client)  # type: ignore[arg-type]


def refs_of(source: WikiSource, partition: str) -> list[DocumentRef]:
    listed = list(source.list_documents(partition))
    assert all(isinstance(r, DocumentRef) for r in listed), listed
    return [r for r in listed if isinstance(r, DocumentRef)]


def documents(source: WikiSource, refs: list[DocumentRef]) -> dict[str, SourceDocument]:
    fetched = list(source.fetch(refs))
    assert all(isinstance(d, SourceDocument) for d in fetched), fetched
    return {d.source_id: d for d in fetched if isinstance(d, SourceDocument)}


def test_partitions_follow_the_configuration() -> None:
    online = WikiConfig(
        api_url="https://wiki.example.org/api.php",
        categories=("Category:New_Features_v11", "Plug-In Development", "New Features v11"),
        pages=("REST API",),
    )
    assert online.partition_keys() == [
        "Category:New_Features_v11",
        "Category:Plug-In_Development",
        PAGES_PARTITION,
    ]
    assert WikiConfig().partition_keys() == [DEMO_EXPORT_PARTITION]
    with pytest.raises(WikiConfigError, match="RAG_WIKI_CATEGORIES"):
        category_partition_key("A,B")


def test_configuration_from_settings() -> None:
    settings = load_settings(
        wiki_api_url="https://wiki.idempiere.org/w-en/api.php",
        wiki_categories="Category:New_Features_v11, Plug-In_Development",
        wiki_pages="REST API,,NF11 Overview",
        wiki_namespaces="0,4",
    )
    config = WikiConfig.from_settings(settings)
    assert config.categories == ("Category:New_Features_v11", "Plug-In_Development")
    assert config.pages == ("REST API", "NF11 Overview")
    assert config.namespaces == (0, 4)
    assert not config.offline


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("RAG_WIKI_API_URL", "wiki.idempiere.org/w-en/api.php"),
        ("RAG_WIKI_NAMESPACES", "main"),
        ("RAG_WIKI_CATEGORY_DEPTH", "deep"),
        ("RAG_WIKI_MAX_CONCURRENCY", "0"),
    ],
)
def test_invalid_settings_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError, match=variable):
        load_settings()


def test_a_partition_lists_exactly_its_pages(server: MediaWikiServer) -> None:
    server.wiki.add_page("Unrelated page", categories=["Manual"], log=False)
    source = make_source(server)
    nf = refs_of(source, NF)
    plugins = refs_of(source, PLUGINS)
    assert len(nf) == 38  # the 39 migrated NF pages, one title shared by two releases
    assert len(plugins) == 5
    assert not {r.source_id for r in nf} & {r.source_id for r in plugins}
    every = {r.source_id for r in nf + plugins}
    assert str(server.wiki.by_title("Unrelated page").pageid) not in every  # type: ignore[union-attr]


def test_unchanged_sync_costs_one_listing_and_a_revision_request_per_50_pages(
    server: MediaWikiServer,
) -> None:
    for i in range(130):
        server.wiki.add_page(f"Bulk {i}", categories=["Plug-In Development"], log=False)
    source = make_source(server, category_depth=0)
    for partition, pages in [(PLUGINS, 135)]:
        server.reset_counts()
        refs = refs_of(source, partition)
        assert len(refs) == pages
        # Nothing changed, so nothing is fetched: the listing is the whole cost.
        assert server.count(list="categorymembers") == 1
        assert server.count(prop="revisions") == math.ceil(pages / 50)
        assert len(server.requests) == 1 + math.ceil(pages / 50)


def test_a_page_in_two_categories_is_one_document(server: MediaWikiServer) -> None:
    shared = server.wiki.by_title("NF9 OSGi New Event Handling Annotation")
    assert shared is not None
    server.wiki.edit(shared.title, categories=["New Features v9", "Plug-In Development"])
    source = make_source(server)
    in_nf = {r.source_id: r for r in refs_of(source, NF)}
    in_plugins = {r.source_id: r for r in refs_of(source, PLUGINS)}
    key = str(shared.pageid)
    assert in_nf[key].key == in_plugins[key].key
    assert in_nf[key].version == in_plugins[key].version == str(shared.revid)
    document = documents(source, [in_plugins[key]])[key]
    assert document.metadata["categories"] == ["New Features v9", "Plug-In Development"]


def test_fetch_gives_rendered_html_with_title_url_and_category_path(
    server: MediaWikiServer,
) -> None:
    source = make_source(server)
    refs = {r.source_id: r for r in refs_of(source, NF)}
    page = server.wiki.by_title("NF11 Single SignOn")
    assert page is not None
    server.reset_counts()
    document = documents(source, [refs[str(page.pageid)]])[str(page.pageid)]
    assert document.title == "NF11 Single SignOn"
    assert document.url == "https://wiki.idempiere.org/en/NF11_Single_SignOn"
    assert document.breadcrumb == "New Features › New Features v11"
    assert document.version == str(page.revid)
    assert document.language == "en_US"
    assert document.original_format is SourceFormat.HTML
    assert document.metadata["category_path"] == ["New Features", "New Features v11"]
    assert document.metadata["pageid"] == page.pageid
    # One siteinfo (for the address pattern) and one parse; chrome switched off at the source.
    assert server.count(action="parse") == 1
    parse = next(r for r in server.requests if r.get("action") == "parse")
    assert parse["disableeditsection"] == parse["disabletoc"] == parse["disablelimitreport"] == "1"
    markdown = to_markdown(document.body, document.original_format).markdown
    assert "NewPP" not in markdown
    assert "## " in markdown


def test_a_page_deleted_between_listing_and_fetch_is_left_out(server: MediaWikiServer) -> None:
    source = make_source(server)
    refs = refs_of(source, PLUGINS)
    gone = server.wiki.by_title("Plugin Callouts")
    assert gone is not None
    server.wiki.delete(gone.title)
    fetched = documents(source, refs)
    assert str(gone.pageid) not in fetched
    assert len(fetched) == len(refs) - 1


def test_a_page_the_wiki_cannot_serve_fails_alone(server: MediaWikiServer) -> None:
    source = make_source(server)
    refs = refs_of(source, PLUGINS)
    broken = refs[0].source_id
    server.inject("503", times=10, when=lambda p: p.get("pageid") == broken)
    results = list(source.fetch(refs))
    failed = [r for r in results if isinstance(r, FailedDocument)]
    assert [f.source_id for f in failed] == [refs[0].key]
    assert "HTTP 503" in failed[0].reason
    assert len(results) == len(refs)


def test_an_edit_changes_the_version_and_a_move_the_title_not_the_id(
    server: MediaWikiServer,
) -> None:
    source = make_source(server)
    before = {r.source_id: r for r in refs_of(source, PLUGINS)}
    edited = server.wiki.edit("Plugin Callouts", html="<p>new text</p>")
    moved = server.wiki.move("Plugin Process", "Developing Plug-Ins - Process")
    after = {r.source_id: r for r in refs_of(source, PLUGINS)}
    assert set(after) == set(before)  # the redirect left behind is in no category
    changed = {k for k in after if after[k].version != before[k].version}
    assert changed == {str(edited.pageid), str(moved.pageid)}
    document = documents(source, [after[str(moved.pageid)]])[str(moved.pageid)]
    assert document.title == "Developing Plug-Ins - Process"
    assert document.url == "https://wiki.idempiere.org/en/Developing_Plug-Ins_-_Process"


def test_explicit_pages_resolve_redirects_and_report_missing_titles(
    server: MediaWikiServer,
) -> None:
    server.wiki.move("NF12 ImageURL Fieldtype", "NF12 Image URL Field Type")
    source = make_source(
        server, pages=("NF12_ImageURL_Fieldtype", "NF12 Image URL Field Type", "No Such Page")
    )
    listed = list(source.list_documents(PAGES_PARTITION))
    refs = [r for r in listed if isinstance(r, DocumentRef)]
    failed = [r for r in listed if isinstance(r, FailedDocument)]
    assert len(refs) == 1
    assert [f.reason for f in failed] == ["no page 'No Such Page' on the wiki (RAG_WIKI_PAGES)"]
    document = documents(source, refs)[refs[0].source_id]
    assert document.title == "NF12 Image URL Field Type"
    assert document.breadcrumb == "New Features v12"


def test_unknown_partition_is_a_configuration_error(server: MediaWikiServer) -> None:
    with pytest.raises(WikiConfigError, match="unknown wiki partition"):
        list(make_source(server).list_documents("Manual"))


# Offline: XML exports.


def test_demo_export_is_the_offline_default() -> None:
    config = WikiConfig.from_settings(load_settings(wiki_api_url=None))
    source = WikiSource(config)
    (partition,) = config.partition_keys()
    refs = refs_of(source, partition)
    assert 8 <= len(refs) <= 12
    fetched = documents(source, refs)
    assert len(fetched) == len(refs)
    for document in fetched.values():
        assert document.url.startswith("https://wiki.idempiere.org/en/")
        assert document.metadata["categories"], document.title
        markdown = to_markdown(document.body, document.original_format).markdown
        assert "[[" not in markdown
        assert "{{" not in markdown
        assert "'''" not in markdown
    events = fetched["102"]
    assert events.breadcrumb == "Plug-In Development"
    markdown = to_markdown(events.body, events.original_format).markdown
    assert "```java\npublic class OrderLimitHandler extends AbstractEventHandler {" in markdown
    assert "| `IEventTopics.PO_BEFORE_NEW` | before a new record is inserted |" in markdown


def test_an_export_file_is_its_own_partition(tmp_path: Path) -> None:
    wiki = FakeWiki()
    wiki.add_page(
        "NF11 Overview",
        categories=["New Features v11"],
        wikitext="== Platform ==\n* Java\n* '''Partitioning'''",
    )
    wiki.add_page("Old name", redirect_to="NF11 Overview")
    wiki.add_page("User:Me", wikitext="notes", ns=2)
    export = tmp_path / "wiki.xml"
    export.write_text(wiki.export_xml(), encoding="utf-8")
    key = export_partition_key(export)
    assert key == f"export:{export.resolve()}"
    assert WikiConfig(xml_file=export).partition_keys() == [key]
    source = WikiSource(WikiConfig(xml_file=export))
    refs = refs_of(source, key)
    page = wiki.by_title("NF11 Overview")
    assert page is not None
    assert [(r.source_id, r.version) for r in refs] == [(str(page.pageid), str(page.revid))]
    document = documents(source, refs)[str(page.pageid)]
    assert document.metadata["categories"] == ["New Features v11"]
    assert to_markdown(document.body, SourceFormat.HTML).markdown == (
        "## Platform\n\n- Java\n- **Partitioning**\n"
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("<mediawiki><page><title>x", "not a valid XML export"),
        ("<html><body/></html>", "not <mediawiki>"),
        ("", "not a valid XML export \\(no element found"),
    ],
)
def test_a_broken_export_says_what_is_wrong(tmp_path: Path, content: str, message: str) -> None:
    export = tmp_path / "broken.xml"
    export.write_text(content, encoding="utf-8")
    with pytest.raises(ExportError, match=message):
        list(read_pages(export))


def test_a_page_without_numeric_id_is_malformed_alone(tmp_path: Path) -> None:
    export = tmp_path / "one-bad.xml"
    export.write_text(
        "<mediawiki><page><title>x</title><id>a</id></page>"
        "<page><title>y</title><ns>0</ns><id>7</id></page></mediawiki>",
        encoding="utf-8",
    )
    bad, good = read_pages(export)
    assert bad == MalformedPage(None, "x", "page 'x' has no numeric <id>")
    assert not isinstance(good, MalformedPage)
    assert good.pageid == 7


def test_full_history_exports_use_the_latest_revision(tmp_path: Path) -> None:
    export = tmp_path / "history.xml"
    export.write_text(
        '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/"><page><title>P</title>'
        "<ns>0</ns><id>5</id>"
        "<revision><id>9</id><timestamp>2024-01-02T00:00:00Z</timestamp><text>new</text></revision>"
        "<revision><id>3</id><timestamp>2024-01-01T00:00:00Z</timestamp><text>old</text></revision>"
        "</page></mediawiki>",
        encoding="utf-8",
    )
    (page,) = read_pages(export)
    assert (page.pageid, page.revid, page.text) == (5, 9, "new")


@pytest.mark.parametrize(
    ("wikitext", "markdown"),
    [
        ("'''bold''' and ''italic''", "**bold** and *italic*"),
        ("* a\n** b\n* c", "- a\n  - b\n- c"),
        ("# one\n# two", "1. one\n2. two"),
        ("{{Note|Restart the server}}", "Restart the server"),
        ("{{Infobox|maintainer=Someone}}Text", "Text"),
        ("[[REST API|the API]]", "[the API](https://wiki.idempiere.org/en/REST_API)"),
        ("[https://www.idempiere.org iDempiere]", "[iDempiere](https://www.idempiere.org)"),
        (
            '<syntaxhighlight lang="sql">\nSELECT 1 < 2;\n</syntaxhighlight>',
            "```sql\nSELECT 1 < 2;\n```",
        ),
        (" indented code", "```\nindented code\n```"),
        ('{|\n! A !! B\n|-\n| 1 || style="x" | 2\n|}', "| A | B |\n| -- | -- |\n| 1 | 2 |"),
        ("50% of a &lt;b&gt; & c", "50% of a \\<b> & c"),
    ],
)
def test_wikitext_renders_through_the_html_normalizer(wikitext: str, markdown: str) -> None:
    rendered = wikitext_to_html(wikitext, article_url="https://wiki.idempiere.org/en/$1")
    assert to_markdown(rendered.html, SourceFormat.HTML).markdown == markdown + "\n"


def test_wikitext_categories_and_redirects() -> None:
    rendered = wikitext_to_html("#REDIRECT [[Target page]]\n[[Category:Plug-In_Development|x]]")
    assert rendered.redirect == "Target page"
    assert rendered.categories == ("Plug-In Development",)


def test_a_real_recorded_mediawiki_page_goes_through_fetch_and_the_normalizer(
    server: MediaWikiServer,
) -> None:
    recorded = shared_wiki_file("mediawiki_api_examples", "parse_fv2_dewiki_Lewisit.json")
    html = json.loads(recorded.read_text(encoding="utf-8"))["response"]["parse"]["text"]
    page = server.wiki.add_page("Lewisit", html, ["Plug-In Development"])
    source = make_source(server)
    refs = [r for r in refs_of(source, PLUGINS) if r.source_id == str(page.pageid)]
    document = documents(source, refs)[str(page.pageid)]
    assert document.body == html
    markdown = to_markdown(document.body, document.original_format).markdown
    assert "Summenformel" in markdown
    assert "mw-parser-output" not in markdown
