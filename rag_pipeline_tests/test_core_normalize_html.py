"""HTML and MediaWiki `action=parse` HTML → canonical Markdown (rag_pipeline.core.normalize)."""

import json

import pytest
from bs4 import BeautifulSoup

from rag_pipeline.core.normalize import NormalizationError, SourceFormat, to_markdown
from rag_pipeline_tests.test_core_normalize_support import (
    LEWISIT,
    LOCAL_FIXTURES,
    assert_golden,
    requires_shared,
    structure,
)

WIKI_PAGE = "https://wiki.idempiere.org/en/NF1.0_ReverseAccrual"


def md(html: str, base_url: str | None = None) -> str:
    return to_markdown(html, SourceFormat.HTML, base_url=base_url).markdown


def _pre_texts(html: str) -> list[str]:
    """The code of every <pre> as a browser shows it (first newline after <pre> dropped)."""
    texts = []
    for pre in BeautifulSoup(html, "html.parser").find_all("pre"):
        text = pre.get_text()
        text = text[1:] if text.startswith("\n") else text
        texts.append(text if text.endswith("\n") else text + "\n")
    return texts


# -- the real MediaWiki parse response --------------------------------------------------------


@pytest.fixture(scope="module")
def lewisit_html() -> str:
    if not LEWISIT.is_file():
        pytest.skip(f"shared fixture {LEWISIT} is absent (the shared folder sits beside the repo)")
    response = json.loads(LEWISIT.read_text(encoding="utf-8"))
    html: str = response["response"]["parse"]["text"]
    return html


@requires_shared
def test_lewisit_matches_golden(lewisit_html: str) -> None:
    result = to_markdown(lewisit_html, SourceFormat.HTML, base_url="https://de.wikipedia.org/wiki/")
    assert_golden("html/parse_fv2_dewiki_Lewisit.md", result.markdown)
    assert result.metadata["removed_elements"] > 40
    json.dumps(result.metadata)


@requires_shared
def test_lewisit_structure(lewisit_html: str) -> None:
    markdown = md(lewisit_html, "https://de.wikipedia.org/wiki/Lewisit")
    parsed = structure(markdown)
    headlines = BeautifulSoup(lewisit_html, "html.parser").select("h2 .mw-headline")
    assert parsed.headings == [(2, span.get_text()) for span in headlines]
    assert len(parsed.headings) == 8
    # The infobox is one table; its nested tables are flattened into cells.
    assert len(parsed.tables) == 1
    infobox = parsed.tables[0]
    assert infobox[0] == ["Strukturformel", ""]
    assert ["Name", "Lewisit"] in infobox
    assert ["Summenformel", "C2H2AsCl3"] in infobox
    assert all(len(row) == 2 for row in infobox)
    cas_row = next(row for row in infobox if row[0].startswith("CAS-Nummer"))
    assert "541-25-3" in cas_row[0]
    assert "Q407502" in cas_row[0]
    # Reference list (13 notes) kept, reference markers and backlinks removed.
    assert "13. *[Chemiewaffenübereinkommen" in markdown
    for marker in ("[1]", "↑", "cite_note"):
        assert marker not in markdown
    # Hidden elements (display:none) and the category box are gone.
    assert "Summenformelsuche" not in markdown
    assert "Normdaten" not in markdown
    # The formula is its TeX source, not MathML spaghetti.
    assert "`\\mathrm {AsCl_{3}+HC{\\equiv }CH" in markdown
    assert "mathvariant" not in markdown
    # Relative and protocol-relative URLs are resolved; red links lose their edit link.
    assert "[Arsenverbindung](https://de.wikipedia.org/wiki/Arsen)" in markdown
    assert "](https://upload.wikimedia.org/wikipedia/commons/thumb/d/d4/" in markdown
    assert "Winford Lee Lewis (1879–1943)" in markdown
    assert "redlink" not in markdown


# -- hand-written fixtures (README.md in the fixtures folder says what they model) ------------


@pytest.mark.parametrize(
    ("name", "base_url"),
    [
        ("mediawiki_page_skin", WIKI_PAGE),
        ("generic_article", "https://kb.example.com/kb/costing/overview.html"),
    ],
)
def test_html_fixture_matches_golden(name: str, base_url: str) -> None:
    html = (LOCAL_FIXTURES / "html" / f"{name}.html").read_text(encoding="utf-8")
    result = to_markdown(html, SourceFormat.HTML, base_url=base_url)
    assert_golden(f"html/{name}.md", result.markdown)
    assert structure(result.markdown).code_blocks == _pre_texts(html)


def test_mediawiki_page_chrome_is_removed() -> None:
    html = (LOCAL_FIXTURES / "html" / "mediawiki_page_skin.html").read_text(encoding="utf-8")
    result = to_markdown(html, SourceFormat.HTML, base_url=WIKI_PAGE)
    markdown = result.markdown
    assert result.metadata["title"] == "NF1.0 ReverseAccrual - iDempiere en"
    for chrome in (
        "edit",  # .mw-editsection
        "Contents",  # #toc
        "Jump to",  # .mw-jump-link
        "From iDempiere en",  # #siteSub
        "Retrieved from",  # .printfooter
        "Category",  # #catlinks
        "New Features 1.0",  # .navbox
        "Navigation menu",  # #mw-navigation
        "Log in",
        "Search iDempiere",
        "last edited",  # footer
        "[1]",  # sup.reference
        "↑",  # .mw-cite-backlink
        "Enlarge",  # .magnify
        "RLCONF",  # script
        "NewPP",  # comment
    ):
        assert chrome not in markdown, chrome
    parsed = structure(markdown)
    assert parsed.headings == [
        (1, "NF1.0 ReverseAccrual"),
        (2, "Feature: Reverse Accrual"),
        (2, "Technical Info"),
    ]
    assert parsed.tables == [
        [
            ["Column", "Definition", ""],
            ["", "Type", "Default"],
            ["ReversalDate", "Date", "none"],
            ["IsAutoReverse", "Yes/No, default N", ""],
        ]
    ]
    assert "```java\nMJournal reversal" in markdown
    assert "\tUPDATE GL_Journal SET IsAutoReverse='N'; \n" in markdown
    assert "**Accrual**\n\nA journal that books" in markdown
    assert "A page nobody wrote yet is mentioned here." in markdown
    assert "[Example Developer](https://wiki.idempiere.org/en/User:ExampleDeveloper)" in markdown


# -- element by element -----------------------------------------------------------------------


def test_headings_are_atx_at_every_level() -> None:
    html = "".join(f"<h{n}>Level {n}</h{n}>" for n in range(1, 7))
    assert md(html) == "".join(f"{'#' * n} Level {n}\n\n" for n in range(1, 7)).rstrip() + "\n"


def test_nested_lists_keep_their_depth() -> None:
    html = "<ul><li>a<ul><li>b<ol><li>c<ul><li>d</li></ul></li></ol></li></ul></li><li>e</li></ul>"
    assert md(html) == "- a\n  - b\n    1. c\n       - d\n- e\n"


def test_adjacent_lists_do_not_merge() -> None:
    result = md("<ul><li>a</li></ul><ul><li>b</li></ul><ol><li>c</li></ol><ol><li>d</li></ol>")
    parsed = structure(result)
    assert parsed.list_items == 4
    assert result == "- a\n\n* b\n\n1. c\n\n1) d\n"


def test_task_list_checkboxes() -> None:
    html = (
        '<ul><li><input type="checkbox" checked disabled> done</li>'
        '<li><input type="checkbox"> todo</li></ul>'
    )
    assert md(html) == "- [x] done\n- [ ] todo\n"


def test_table_header_detection() -> None:
    with_th = "<table><tr><th>A</th><th>B</th></tr><tr><td>1</td><td>2</td></tr></table>"
    assert md(with_th) == "| A | B |\n| -- | -- |\n| 1 | 2 |\n"
    in_thead = "<table><thead><tr><td>A</td></tr></thead><tbody><tr><td>1</td></tr></tbody></table>"
    assert md(in_thead + "<p>x</p>").startswith("| A |\n| -- |\n| 1 |\n")
    no_header = "<table><tr><td>1</td><td>2</td></tr><tr><td>3</td><td>4</td></tr></table>"
    assert md(no_header) == "|  |  |\n| -- | -- |\n| 1 | 2 |\n| 3 | 4 |\n"


def test_table_spans_degrade_to_empty_cells() -> None:
    html = (
        "<table><tr><th colspan='2'>Wide</th><th>C</th></tr>"
        "<tr><td rowspan='2'>Tall</td><td>b1</td><td>c1</td></tr>"
        "<tr><td>b2</td><td>c2</td></tr></table>"
    )
    assert structure(md(html)).tables == [
        [["Wide", "", "C"], ["Tall", "b1", "c1"], ["", "b2", "c2"]]
    ]


def test_a_table_whose_spans_would_make_millions_of_cells_becomes_text() -> None:
    # 4.5 KB of cells spanning 1,000 columns and rows (64 each after the cap) used to make
    # a grid of millions of cells: seconds of conversion and megabytes of Markdown.
    row = "<tr>" + "<td colspan=1000 rowspan=1000>x</td>" * 2 + "</tr>"
    html = "<table>" + row * 100 + "</table><p>after</p>"
    out = md(html)
    assert len(out) < 4 * len(html)
    assert out.split("\n\n")[:2] == ["x, x", "x, x"]
    assert out.rstrip().endswith("after")
    assert md("<table>" + row * 10 + "</table>").startswith("x, x\n\nx, x")
    # Spans that stay near the table's own size still lay out on a grid.
    wide = "<tr><td colspan=3>a</td><td>b</td></tr><tr><td>1</td><td>2</td></tr>"
    assert md("<table>" + wide * 50 + "</table>").startswith("|  |  |  |  |\n")


def test_table_cells_escape_pipes_and_flatten_blocks() -> None:
    html = (
        "<table><tr><th>Key</th><th>Value</th></tr>"
        "<tr><td>a|b</td><td><p>one</p><ul><li>x</li><li>y</li></ul><code>p|q</code></td></tr>"
        "<tr><td>nested</td><td><table><tr><td>k</td><td>v</td></tr>"
        "<tr><td>k2</td><td>v2</td></tr></table></td></tr></table>"
    )
    result = md(html)
    assert "| a \\| b |" not in result  # no spaces are invented
    assert structure(result).tables == [
        [["Key", "Value"], ["a|b", "one x; y p|q"], ["nested", "k, v; k2, v2"]]
    ]


def test_table_alignment_and_caption() -> None:
    html = (
        "<table><caption>Totals</caption><tr><th align='right'>N</th>"
        "<th style='text-align: center'>C</th><th>L</th></tr>"
        "<tr><td>1</td><td>2</td><td>3</td></tr>"
        "</table>"
    )
    assert md(html) == "Totals\n\n| N | C | L |\n| -: | :-: | -- |\n| 1 | 2 | 3 |\n"


def test_one_cell_layout_table_keeps_block_content() -> None:
    assert md("<table><tr><td><h3>Note</h3><ul><li>a</li></ul></td></tr></table>") == (
        "### Note\n\n- a\n"
    )


@pytest.mark.parametrize(
    ("html", "language"),
    [
        ('<pre><code class="language-java">x</code></pre>', "java"),
        ('<pre class="lang-sql">x</pre>', "sql"),
        (
            '<div class="mw-highlight mw-highlight-lang-xml mw-content-ltr"><pre>x</pre></div>',
            "xml",
        ),
        ('<div class="highlight highlight-source-python"><pre>x</pre></div>', "python"),
        ('<syntaxhighlight lang="bash">x</syntaxhighlight>', "bash"),
        ('<pre class="brush: js;">x</pre>', "js"),
        ('<div lang="en"><pre>x</pre></div>', ""),
    ],
)
def test_code_language_detection(html: str, language: str) -> None:
    assert md(html) == f"```{language}\nx\n```\n"


def test_pre_content_is_byte_identical() -> None:
    code = "\tint a;  \n    if (a &lt; 1) { b(); }\n\n\nend\t\n"
    result = md(f"<pre>\n{code}</pre>")
    assert structure(result).code_blocks == [code.replace("&lt;", "<")]
    with_markup = '<pre><span class="k">int</span> x;<br>y = `z`;</pre>'
    assert structure(md(with_markup)).code_blocks == ["int x;\ny = `z`;\n"]


def test_blockquote_and_definition_list() -> None:
    assert md("<blockquote><p>q1</p><blockquote><p>q2</p></blockquote></blockquote>") == (
        "> q1\n>\n> > q2\n"
    )
    assert md("<dl><dt>Term</dt><dd>Definition <i>here</i></dd></dl>") == (
        "**Term**\n\nDefinition *here*\n"
    )


@pytest.mark.parametrize(
    ("href", "base_url", "target"),
    [
        ("/en/Page", "https://wiki.idempiere.org/en/Other", "https://wiki.idempiere.org/en/Page"),
        (
            "Sub/Page",
            "https://wiki.idempiere.org/en/Other",
            "https://wiki.idempiere.org/en/Sub/Page",
        ),
        ("//cdn.example.org/x", "https://wiki.idempiere.org/en/", "https://cdn.example.org/x"),
        (
            "#Section",
            "https://wiki.idempiere.org/en/Page",
            "https://wiki.idempiere.org/en/Page#Section",
        ),
        ("https://abs.example.org/a", "https://wiki.idempiere.org/", "https://abs.example.org/a"),
        ("mailto:dev@example.org", "https://wiki.idempiere.org/", "mailto:dev@example.org"),
        ("/en/Page", None, "/en/Page"),
    ],
)
def test_links_are_resolved_against_base_url(href: str, base_url: str | None, target: str) -> None:
    assert (
        md(f'<p><a href="{href}" title="tooltip">text</a></p>', base_url) == f"[text]({target})\n"
    )


def test_links_without_target_or_with_script_keep_their_text() -> None:
    assert md(
        '<p><a href="javascript:alert(1)">click</a> <a>plain</a> <a href="">empty</a></p>'
    ) == ("click plain empty\n")


def test_autolinks_and_links_with_awkward_targets() -> None:
    assert md('<p><a href="https://x.org/a">https://x.org/a</a></p>') == "<https://x.org/a>\n"
    assert md('<p><a href="/a b">spaced</a></p>') == "[spaced](/a%20b)\n"
    assert (
        md('<p><a href="/wiki/Pascal_(Einheit)">Pa</a></p>') == "[Pa](</wiki/Pascal_(Einheit)>)\n"
    )


def test_images_become_alt_text_and_link() -> None:
    assert md('<img src="/i/a.png" alt="Diagram">', "https://x.org/doc/") == (
        "![Diagram](https://x.org/i/a.png)\n"
    )
    assert md('<p><img src="data:image/png;base64,AAAA" alt="pixel"> after</p>') == "pixel after\n"
    assert md('<h2><img src="/i.png" alt="Logo"> Title</h2>') == "## Logo Title\n"
    # MediaWiki wraps images in a link to the file page; the image itself is what matters.
    wrapped = '<a href="/en/File:A.png" class="image"><img src="/images/A.png" alt="A"></a>'
    assert md(wrapped) == "![A](/images/A.png)\n"


@pytest.mark.parametrize(
    "element",
    [
        "<script>var leak = 1;</script>",
        "<style>.leak { color: red }</style>",
        "<nav><a href='/'>leak</a></nav>",
        "<footer>leak</footer>",
        "<form><label>leak</label><input name='q'></form>",
        "<noscript>leak</noscript>",
        "<template><p>leak</p></template>",
        "<header><a href='/'>leak</a></header>",
        "<div role='navigation'>leak</div>",
        "<p style='display: none'>leak</p>",
        "<p hidden>leak</p>",
        '<span class="mw-editsection">[<a href="?action=edit">leak</a>]</span>',
        '<div id="toc" class="toc"><ul><li>leak</li></ul></div>',
        '<div class="toc"><ul><li>leak</li></ul></div>',
        '<table class="navbox"><tr><td>leak</td><td>leak</td></tr></table>',
        '<div class="vertical-navbox">leak</div>',
        '<a class="mw-jump-link" href="#mw-head">leak</a>',
        '<div class="printfooter">leak</div>',
        '<div id="catlinks" class="catlinks">leak</div>',
        '<sup class="reference"><a href="#cite_note-1">[leak]</a></sup>',
        '<span class="mw-cite-backlink">leak</span>',
        '<div class="noprint">leak</div>',
    ],
)
def test_chrome_is_dropped(element: str) -> None:
    assert md(f"<div><p>Content stays.</p>{element}<p>And this.</p></div>") == (
        "Content stays.\n\nAnd this.\n"
    )


def test_header_inside_an_article_is_content() -> None:
    html = "<article><header><h1>Title</h1></header><p>Body</p></article>"
    assert md(html) == "# Title\n\nBody\n"


def test_inline_formatting_and_escaping() -> None:
    html = (
        "<p><b>b</b> <i>i</i> <code>c</code> <s>s</s> <u>u</u> <mark>m</mark> "
        "<a href='https://x.org'>a</a> &amp; 1 * 2 _x_ [y] &lt;z&gt; # h</p>"
    )
    # mdformat keeps only the escapes that matter: `[y]` is no link without a definition.
    assert md(html) == "**b** *i* `c` ~~s~~ u m [a](https://x.org) & 1 * 2 \\_x\\_ [y] \\<z> # h\n"


def test_whitespace_between_blocks_never_makes_an_indented_code_block() -> None:
    html = "<html>\n  <body>\n    <main>\n      <span> <span> </span> </span>\n      <p>Text</p>\n"
    assert md(html + "    </main>\n  </body>\n</html>") == "Text\n"


def test_math_becomes_tex_code() -> None:
    html = (
        '<p>Formula: <span class="mwe-math-element"><span style="display:none">'
        '<math alttext="{\\displaystyle a^{2}}"><mi>a</mi></math></span>'
        '<img class="mwe-math-fallback-image-inline" alt="{\\displaystyle a^{2}}" src="x.svg">'
        "</span></p>"
    )
    assert md(html) == "Formula: `a^{2}`\n"


def test_iframe_becomes_a_link() -> None:
    assert md('<iframe src="https://www.youtube.com/embed/x"></iframe>') == (
        "<https://www.youtube.com/embed/x>\n"
    )


def test_empty_and_malformed_html_never_raise() -> None:
    assert md("") == ""
    assert md("   ") == ""
    assert md("<p>unclosed <b>bold <i>both") == "unclosed **bold *both***\n"
    assert md("</div></p>text<td>cell") == "text cell\n"


def test_pathologically_deep_html_raises_normalization_error() -> None:
    with pytest.raises(NormalizationError, match="nested too deeply"):
        md("<div>" * 5000 + "x")


def test_local_html_fixtures_are_present() -> None:
    # The fixture layout the golden tests above rely on.
    assert sorted(p.name for p in (LOCAL_FIXTURES / "html").glob("*.html")) == [
        "generic_article.html",
        "mediawiki_page_skin.html",
    ]
