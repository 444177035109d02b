# pyright: standard
# Checked at pyright's standard level, not strict: it subclasses markdownify's converter, whose
# stub (markdownify/__init__.pyi) declares only the public API. The methods extended here exist
# in the pinned markdownify 1.2.3; the lines using them carry a targeted ignore.
"""HTML tree → Markdown: markdownify, extended where GFM needs more than it gives.

markdownify does the inline work (emphasis, links, escaping of text) and the lists; this
subclass adds what a knowledge base needs and markdownify lacks or gets wrong for us:

- `<pre>` as a fenced block whose content is byte-identical, with the language taken from
  the classes GitHub, highlight.js and MediaWiki use;
- tables laid out on a grid (colspan and rowspan become empty cells, ragged rows are padded,
  a header row is made up when the table has none, pipes are escaped, cell alignment kept);
  a table inside a cell is flattened to text, a one-cell layout table to its content;
- task-list checkboxes as `[x]`, definition lists as a bold term and its definition;
- link targets that survive Markdown (no spaces), and no link titles (tooltips, and MediaWiki
  repeats the page title in every one of them).

What it reads off elements (attributes, code languages, table rows and spans, link targets)
is in `elements`.
"""

from bs4 import Tag
from markdownify import ATX, SPACES, MarkdownConverter, chomp  # pyright: ignore[reportAttributeAccessIssue]

from rag_pipeline.core.normalize.elements import (
    attribute,
    cell_alignment,
    cell_span,
    code_language,
    follows_same_list,
    is_autolink_target,
    link_destination,
    row_cells,
    table_rows,
)
from rag_pipeline.core.normalize.inline import (
    code_fence,
    code_span,
    collapse_whitespace,
    escape_table_pipes,
    preformatted_text,
)

_INLINE = "_inline"
_NOFORMAT = "_noformat"
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_LINK_SCHEMES_DROPPED = ("javascript:", "vbscript:", "data:")
_DELIMITERS = {"": "---", "left": ":--", "right": "--:", "center": ":-:"}
# A table's grid may hold this many cells per cell of the source, plus the allowance: spans
# past that are an amplification (each grid cell costs ~0.3 ms in the Markdown formatter).
_GRID_CELLS_PER_CELL = 8
_GRID_CELLS_ALLOWANCE = 1_000


class _TooLargeError(Exception):
    """A table whose spans would make a grid far larger than its source."""


class HtmlToMarkdown(MarkdownConverter):  # type: ignore[misc]
    """markdownify configured for canonical GFM, plus the conversions listed in the module doc."""

    def __init__(self) -> None:
        """Configure markdownify: ATX headings, `-` bullets, every special character escaped."""
        super().__init__(
            heading_style=ATX,
            bullets="-",
            # Escape everything that could be Markdown: the canonical re-emit removes the
            # escapes that turn out unnecessary, but it cannot restore a lost one.
            escape_misc=True,
            escape_asterisks=True,
            escape_underscores=True,
            strong_em_symbol="*",
            newline_style=SPACES,
            autolinks=True,
            # HTML collapses whitespace; wrap=True with no width makes markdownify do the same
            # instead of keeping source newlines inside paragraphs (which could start a list).
            wrap=True,
            wrap_width=None,
        )

    # -- dispatch -------------------------------------------------------------------------

    def process_tag(self, node: Tag, parent_tags: set[str] | None = None) -> str:
        """Convert one element; `<pre>` and `<table>` are laid out here, not by markdownify."""
        tags: set[str] = set() if parent_tags is None else parent_tags
        if node.name in ("pre", "syntaxhighlight"):
            return self._convert_pre(node, tags)
        if node.name == "table":
            return self._convert_table(node, tags)
        result: str = super().process_tag(node, parent_tags=tags)  # pyright: ignore[reportAttributeAccessIssue]
        return result

    # -- code -----------------------------------------------------------------------------

    def _convert_pre(self, node: Tag, tags: set[str]) -> str:
        code = preformatted_text(node)
        if _NOFORMAT in tags:
            return code
        if _INLINE in tags:
            return " " + code_span(collapse_whitespace(code)) + " "
        return code_fence(code, code_language(node))

    def convert_code(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        """Inline code; its whitespace collapses as the browser collapses it."""
        if _NOFORMAT in parent_tags:
            return text
        prefix, suffix, _ = chomp(text)
        span = code_span(collapse_whitespace(text))
        return prefix + span + suffix if span else ""

    convert_kbd = convert_code
    convert_samp = convert_code

    # -- tables ---------------------------------------------------------------------------

    def _cell_markdown(self, cell: Tag, tags: set[str]) -> str:
        # process_tag marks the cell's children as inline; convert_td/th return their text.
        text: str = super().process_tag(cell, parent_tags=tags)  # pyright: ignore[reportAttributeAccessIssue]
        return escape_table_pipes(collapse_whitespace(text))

    def _table_grid(
        self, rows: list[tuple[Tag, bool]], tags: set[str], room: int
    ) -> list[list[str]]:
        grid: list[list[str]] = []
        spanned: dict[int, int] = {}  # column -> rows still covered by a rowspan from above
        # Spans multiply: rows of cells spanning 64 columns and 64 rows each made a 4.5 KB
        # table a grid of millions of cells. Past `room` cells the table is not laid out.
        for row, _ in rows:
            out: list[str] = []
            for cell in [*row_cells(row), None]:
                # Columns still covered by a cell of an earlier row get an empty cell here.
                while spanned.get(len(out), 0) > 0:
                    spanned[len(out)] -= 1
                    out.append("")
                if cell is None:
                    break
                text = self._cell_markdown(cell, tags)
                rowspan = cell_span(cell, "rowspan")
                for offset in range(cell_span(cell, "colspan")):
                    if rowspan > 1:
                        spanned[len(out)] = rowspan - 1
                    out.append("" if offset else text)
            room -= len(out)
            if room < 0:
                raise _TooLargeError
            for later in [c for c, left in spanned.items() if c > len(out) and left > 0]:
                spanned[later] -= 1
            grid.append(out)
        return grid

    def _convert_table(self, node: Tag, tags: set[str]) -> str:
        rows = table_rows(node)
        if not rows or not any(row_cells(row) for row, _ in rows):
            # Not a real table (or an empty one): keep whatever text it has.
            return self._convert_as_block(node, tags)
        if len(rows) == 1 and len(row_cells(rows[0][0])) == 1:
            # A one-cell table is layout, not data: its content keeps its block structure.
            return self._convert_as_block(row_cells(rows[0][0])[0], tags)
        room = _GRID_CELLS_ALLOWANCE + _GRID_CELLS_PER_CELL * sum(
            len(row_cells(row)) for row, _ in rows
        )
        try:
            grid = self._table_grid(rows, tags, room)
        except _TooLargeError:
            # Its rows as text: the words stay searchable and the size proportional.
            cells = [[self._cell_markdown(c, tags) for c in row_cells(row)] for row, _ in rows]
            return _rows_as_text(cells, inline=_INLINE in tags)
        width = max(len(row) for row in grid)
        if _INLINE in tags or width * len(grid) > room:
            # GFM cells hold one line: a table inside a cell (or a heading) becomes text.
            return _rows_as_text(grid, inline=_INLINE in tags)
        grid = [row + [""] * (width - len(row)) for row in grid]
        first_row, first_in_thead = rows[0]
        first_cells = row_cells(first_row)
        if first_in_thead or all(cell.name == "th" for cell in first_cells):
            header, body = grid[0], grid[1:]
        else:
            header, body = [""] * width, grid
        aligns: list[str] = []
        for cell in first_cells:
            aligns.extend([cell_alignment(cell)] * cell_span(cell, "colspan"))
        aligns = (aligns + [""] * width)[:width]
        lines = ["| " + " | ".join(header) + " |"]
        lines.append("| " + " | ".join(_DELIMITERS[a] for a in aligns) + " |")
        lines.extend("| " + " | ".join(row) + " |" for row in body)
        caption = node.find("caption", recursive=False)
        caption_text = ""
        if isinstance(caption, Tag):
            caption_text = collapse_whitespace(super().process_tag(caption, parent_tags=tags))  # pyright: ignore[reportAttributeAccessIssue]
        before = f"\n\n{caption_text}\n\n" if caption_text else "\n\n"
        return before + "\n".join(lines) + "\n\n"

    def _convert_as_block(self, node: Tag, tags: set[str]) -> str:
        # markdownify decides inline-ness by tag name; a <div> is converted as a block.
        node.name = "div"
        return self.process_tag(node, tags)

    def convert_td(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        """A cell's content; the row and table layout is `_convert_table`'s job.

        The spaces keep a stray cell (one outside any table) from gluing onto its neighbours.
        """
        return f" {text} "

    convert_th = convert_td

    def convert_caption(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        """A table caption's text; `_convert_table` places it above the table."""
        return collapse_whitespace(text)

    # -- links and images -----------------------------------------------------------------

    def convert_a(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        """A link without title; dangerous schemes and empty targets keep only the text."""
        if _NOFORMAT in parent_tags:
            return text
        prefix, suffix, text = chomp(text)
        if not text:
            return ""
        href = attribute(el, "href").strip()
        if not href or href.lower().startswith(_LINK_SCHEMES_DROPPED):
            return prefix + text + suffix
        if el.get_text().strip() == href and is_autolink_target(href):
            return f"{prefix}<{href}>{suffix}"
        return f"{prefix}[{text}]({link_destination(href)}){suffix}"

    def convert_img(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        """`![alt](src)`; only the alt text where Markdown allows no image (headings, code)."""
        alt = collapse_whitespace(attribute(el, "alt"))
        src = attribute(el, "src").strip()
        if _NOFORMAT in parent_tags:
            return alt
        escaped_alt: str = self.escape(alt, parent_tags)  # pyright: ignore[reportAttributeAccessIssue]
        if not src or src.lower().startswith("data:") or parent_tags & _HEADINGS:
            return escaped_alt
        return f"![{escaped_alt}]({link_destination(src)})"

    def convert_iframe(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        """An embedded page (video, map) as a link to it."""
        src = attribute(el, "src").strip()
        if not is_autolink_target(src) or not src.lower().startswith(("http:", "https:")):
            return ""
        return f" <{src}> " if _INLINE in parent_tags else f"\n\n<{src}>\n\n"

    def convert__document_(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        """The whole document; whitespace around it is never content."""
        return text.strip()

    # -- lists ----------------------------------------------------------------------------

    def convert_input(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        """A checkbox becomes a GFM task marker; other form controls carry no content."""
        if attribute(el, "type").lower() != "checkbox":
            return ""
        return "[x] " if el.has_attr("checked") else "[ ] "

    def convert_li(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        """A list item; inside a table cell or heading, an item of a `;`-separated run."""
        text = text.strip()
        if _INLINE in parent_tags:
            return f" {text};" if text else ""
        if not text:
            return "\n"
        parent = el.parent
        # Two lists in a row merge into one in Markdown unless their markers differ.
        alternate = isinstance(parent, Tag) and follows_same_list(parent)
        if isinstance(parent, Tag) and parent.name == "ol":
            start_value = attribute(parent, "start").strip()
            start = int(start_value) if start_value.isdigit() else 1
            position = len(el.find_previous_siblings("li"))
            marker = f"{start + position}{')' if alternate else '.'} "
        else:
            marker = "* " if alternate else "- "
        indent = " " * len(marker)
        lines = text.split("\n")
        rest = [indent + line if line else "" for line in lines[1:]]
        return "\n".join([marker + lines[0], *rest]) + "\n"

    def convert_list(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        """A list; inline it is a `;`-separated run of its items."""
        if _INLINE in parent_tags:
            return " " + text.strip().rstrip(";") + " "
        result: str = super().convert_list(el, text, parent_tags)  # pyright: ignore[reportAttributeAccessIssue]
        return result

    convert_ul = convert_list
    convert_ol = convert_list

    def convert_dt(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        """A definition term: a bold line of its own (GFM has no definition lists)."""
        text = collapse_whitespace(text)
        if _INLINE in parent_tags:
            return f" {text} "
        if not text:
            return ""
        return f"\n\n**{text}**\n\n" if "**" not in text else f"\n\n{text}\n\n"

    def convert_dd(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        """A definition: its content as ordinary blocks."""
        text = text.strip()
        if _INLINE in parent_tags:
            return f" {text} "
        return f"\n\n{text}\n\n" if text else ""

    # -- odds and ends --------------------------------------------------------------------

    def convert_br(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        """A hard line break; a space where Markdown has no line breaks (cells, headings)."""
        if _INLINE in parent_tags or parent_tags & _HEADINGS:
            return " "
        result: str = super().convert_br(el, text, parent_tags)  # pyright: ignore[reportAttributeAccessIssue]
        return result

    def convert_hr(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        """A thematic break (nothing inside a table cell)."""
        return " " if _INLINE in parent_tags else "\n\n---\n\n"

    def convert_summary(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        """The visible title of a `<details>` element, as a paragraph of its own."""
        text = text.strip()
        if _INLINE in parent_tags:
            return f" {text} "
        return f"\n\n{text}\n\n" if text else ""

    def convert_details(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        """The content of a `<details>` element as ordinary blocks."""
        result: str = self.convert_div(el, text, parent_tags)  # pyright: ignore[reportAttributeAccessIssue]
        return result

    def convert_tr(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        """A row outside any table (broken HTML): its cells as a paragraph."""
        return f"\n\n{text.strip()}\n\n"


def _rows_as_text(rows: list[list[str]], *, inline: bool) -> str:
    """A table's non-empty cells, a row per paragraph (inline: on one line, by "; ")."""
    lines = [line for line in (", ".join(cell for cell in row if cell) for row in rows) if line]
    if inline:
        return " " + "; ".join(lines) + " "
    return "\n\n" + "\n\n".join(lines) + "\n\n"
