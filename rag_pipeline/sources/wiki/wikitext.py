"""Wikitext → HTML for pages read from an XML export, so they join the HTML normalizer's path.

An export holds wikitext, not the HTML `action=parse` renders; offline there is no wiki to
render it. This covers what documentation pages use: headings, paragraphs, bold/italic, nested
`* # ; :` lists, wikitables, `<pre>`/`<syntaxhighlight>`/`<source>` and leading-space code,
internal/external links, images (their caption), `----`, and `[[Category:…]]` (collected, not
rendered). Templates are not expanded (that needs the wiki's template pages): a template's
unnamed arguments are kept as text, so `{{Note|Restart the server}}` keeps its sentence while
an infobox's `key=value` pairs are dropped.

Decision: a small line-oriented converter rather than a dependency. mwparserfromhell parses
but renders nothing; pandoc's reader would add a 100 MB binary for one offline mode. Text is
HTML-escaped, except the inline tags wikitext allows, which pass through to the HTML parser.
"""

import html
import re
from dataclasses import dataclass

from rag_pipeline.sources.wiki.client import article_address

_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_MAGIC = re.compile(r"__[A-Z]+__")
_REDIRECT = re.compile(r"^\s*#REDIRECT\s*\[\[([^\]|#]+)", re.IGNORECASE)
_CATEGORY = re.compile(r"\[\[\s*Category\s*:\s*([^\]|]+)(?:\|[^\]]*)?\]\]\n?", re.IGNORECASE)
_CODE_BLOCK = re.compile(
    r"<(pre|syntaxhighlight|source|nowiki)(\s[^>]*)?>(.*?)</\1\s*>", re.DOTALL | re.IGNORECASE
)
_LANG_ATTR = re.compile(r"""lang\s*=\s*["']?([\w+#-]+)""", re.IGNORECASE)
_HEADING = re.compile(r"^(={1,6})\s*(.+?)\s*\1\s*$")
_FILE_LINK = re.compile(r"\[\[\s*(?:File|Image)\s*:([^\]|]+)((?:\|[^\]]*)?)\]\]", re.IGNORECASE)
_WIKI_LINK = re.compile(r"\[\[([^\]|]+)(?:\|([^\]]*))?\]\]")
_EXTERNAL_LINK = re.compile(r"\[((?:https?|ftp)://[^\s\]]+)(?:\s+([^\]]*))?\]")
_BOLD_ITALIC = re.compile(r"'''''(.+?)'''''")
_BOLD = re.compile(r"'''(.+?)'''")
_ITALIC = re.compile(r"''(.+?)''")
# Inline HTML that wikitext allows and that survives to the normalizer; any other `<` is text.
_ALLOWED_TAG = re.compile(
    r"</?(?:code|tt|b|i|u|s|strong|em|br|sup|sub|span|small|big|kbd|var|del|ins)\b[^<>]*>",
    re.IGNORECASE,
)
_BARE_AMPERSAND = re.compile(r"&(?!#?\w+;)")
_PLACEHOLDER = "\x00{}\x00"
_PLACEHOLDER_RE = re.compile(r"\x00(\d+)\x00")
_LIST_TAGS = {"*": ("ul", "li"), "#": ("ol", "li"), ";": ("dl", "dt"), ":": ("dl", "dd")}


@dataclass(frozen=True)
class WikitextPage:
    """A page's wikitext rendered: its HTML, categories and redirect target (if it is one)."""

    html: str
    categories: tuple[str, ...]
    redirect: str | None = None


def wikitext_to_html(text: str, *, article_url: str = "") -> WikitextPage:
    """Render wikitext to HTML.

    Args:
        text: the page's wikitext.
        article_url: the wiki's article address with `$1` for the title
            (`https://wiki.idempiere.org/en/$1`); internal links point there ("" = relative).
    """
    redirect = _REDIRECT.match(text)
    categories = tuple(
        dict.fromkeys(" ".join(c.replace("_", " ").split()) for c in _CATEGORY.findall(text))
    )
    text = _CATEGORY.sub("", _MAGIC.sub("", _COMMENT.sub("", text.replace("\r\n", "\n"))))
    blocks: list[str] = []

    def keep_code(match: re.Match[str]) -> str:
        tag, attrs, body = match.group(1).lower(), match.group(2) or "", match.group(3)
        if tag == "nowiki":
            blocks.append(_escape_text(body))
            return _PLACEHOLDER.format(len(blocks) - 1)
        lang = _LANG_ATTR.search(attrs)
        css = f' class="language-{html.escape(lang.group(1))}"' if lang else ""
        # <pre> decodes character entities like the rest of wikitext; syntaxhighlight does not.
        code = html.unescape(body) if tag == "pre" else body
        blocks.append(f"<pre><code{css}>{html.escape(code.strip(chr(10)))}</code></pre>")
        return "\n" + _PLACEHOLDER.format(len(blocks) - 1) + "\n"

    text = _CODE_BLOCK.sub(keep_code, text)
    text = _strip_templates(text)
    renderer = _Renderer(article_url)
    body = renderer.render(text.split("\n"))
    body = _PLACEHOLDER_RE.sub(lambda m: blocks[int(m.group(1))], body)
    return WikitextPage(
        html=f'<div class="mw-parser-output">{body}</div>',
        categories=categories,
        redirect=redirect.group(1).strip() if redirect else None,
    )


def _strip_templates(text: str) -> str:
    """Replace each `{{…}}` (nested ones too) by its unnamed arguments' text."""
    while True:
        # Innermost first: a template with no `{{` inside it.
        replaced = re.sub(r"\{\{((?:(?!\{\{|\}\}).)*)\}\}", _template_text, text, flags=re.DOTALL)
        if replaced == text:
            return text
        text = replaced


def _template_text(match: re.Match[str]) -> str:
    parts = _split_outside_links(match.group(1), "|")
    kept = [p.strip() for p in parts[1:] if not re.match(r"^\s*[\w ]+\s*=", p)]
    return " ".join(p for p in kept if p)


def _split_outside_links(text: str, separator: str) -> list[str]:
    """`text` split at `separator`, except inside `[[…]]` (a link's own `|`)."""
    parts, depth, current = [], 0, []
    i = 0
    while i < len(text):
        if text.startswith("[[", i):
            depth += 1
            current.append("[[")
            i += 2
            continue
        if text.startswith("]]", i) and depth:
            depth -= 1
            current.append("]]")
            i += 2
            continue
        if depth == 0 and text.startswith(separator, i):
            parts.append("".join(current))
            current = []
            i += len(separator)
            continue
        current.append(text[i])
        i += 1
    parts.append("".join(current))
    return parts


class _Renderer:
    """Block structure: one pass over the lines, with the open list and paragraph as state."""

    def __init__(self, article_url: str) -> None:
        self.article_url = article_url
        self.out: list[str] = []
        self.paragraph: list[str] = []
        self.list_stack: list[str] = []
        self.pre: list[str] = []

    def render(self, lines: list[str]) -> str:
        index = 0
        while index < len(lines):
            line = lines[index]
            if line.startswith("{|"):
                end = index + 1
                while end < len(lines) and not lines[end].startswith("|}"):
                    end += 1
                self._flush()
                self.out.append(self._table(lines[index : end + 1]))
                index = end + 1
                continue
            self._line(line)
            index += 1
        self._flush()
        return "\n".join(self.out)

    def _line(self, line: str) -> None:
        heading = _HEADING.match(line)
        if heading:
            self._flush()
            level = len(heading.group(1))
            self.out.append(f"<h{level}>{self.inline(heading.group(2))}</h{level}>")
        elif line.startswith(" ") and line.strip() and not _PLACEHOLDER_RE.fullmatch(line.strip()):
            self._flush(keep_pre=True)
            self.pre.append(line[1:])
        elif line[:1] in _LIST_TAGS:
            self._flush(keep_list=True)
            prefix = re.match(r"[*#;:]+", line)
            assert prefix is not None
            self._list_item(prefix.group(0), line[prefix.end() :].strip())
        elif line.strip() == "----" or re.fullmatch(r"-{4,}", line.strip()):
            self._flush()
            self.out.append("<hr/>")
        elif not line.strip():
            self._flush()
        elif _PLACEHOLDER_RE.fullmatch(line.strip()):
            self._flush()
            self.out.append(line.strip())
        else:
            self._flush(keep_paragraph=True)
            self.paragraph.append(self.inline(line))

    def _list_item(self, prefix: str, content: str) -> None:
        # Keep the open levels the new prefix shares, close the rest, then open what is new.
        common = 0
        while (
            common < min(len(self.list_stack), len(prefix))
            and _LIST_TAGS[self.list_stack[common]][0] == _LIST_TAGS[prefix[common]][0]
        ):
            common += 1
        while len(self.list_stack) > common:
            self._close_level()
        if common == len(prefix):
            # A sibling: close the current item, open the next one in the same list.
            self.out.append(f"</{_LIST_TAGS[self.list_stack[-1]][1]}>")
            self.list_stack[-1] = prefix[-1]
            self.out.append(f"<{_LIST_TAGS[prefix[-1]][1]}>")
        else:
            for marker in prefix[common:]:
                self.out.append(f"<{_LIST_TAGS[marker][0]}><{_LIST_TAGS[marker][1]}>")
                self.list_stack.append(marker)
        if prefix[-1] == ";" and " : " in content:
            # `; term : definition` on one line.
            term, definition = content.split(" : ", 1)
            self.out.append(f"{self.inline(term)}</dt><dd>{self.inline(definition)}")
            self.list_stack[-1] = ":"
        else:
            self.out.append(self.inline(content))

    def _close_level(self) -> None:
        marker = self.list_stack.pop()
        self.out.append(f"</{_LIST_TAGS[marker][1]}></{_LIST_TAGS[marker][0]}>")

    def _flush(
        self, *, keep_list: bool = False, keep_pre: bool = False, keep_paragraph: bool = False
    ) -> None:
        if self.paragraph and not keep_paragraph:
            self.out.append("<p>" + "\n".join(self.paragraph) + "</p>")
            self.paragraph = []
        if self.pre and not keep_pre:
            self.out.append("<pre>" + _escape_text("\n".join(self.pre)) + "</pre>")
            self.pre = []
        while self.list_stack and not keep_list:
            self._close_level()

    def _table(self, lines: list[str]) -> str:
        rows: list[list[str]] = []
        caption = ""
        for line in lines[1:]:
            stripped = line.strip()
            if stripped.startswith("|}"):
                break
            if stripped.startswith("|+"):
                caption = self.inline(stripped[2:].strip())
            elif stripped.startswith("|-"):
                rows.append([])
            elif stripped.startswith(("!", "|")):
                tag = "th" if stripped[0] == "!" else "td"
                separator = "!!" if tag == "th" else "||"
                if not rows:
                    rows.append([])
                for cell in _split_outside_links(stripped[1:], separator):
                    rows[-1].append(f"<{tag}>{self.inline(_cell_content(cell))}</{tag}>")
            elif rows and rows[-1]:
                # A continuation line of the previous cell.
                last = rows[-1][-1]
                close = last.rindex("</")
                rows[-1][-1] = f"{last[:close]}<br/>{self.inline(stripped)}{last[close:]}"
        body = "".join(f"<tr>{''.join(cells)}</tr>" for cells in rows if cells)
        cap = f"<caption>{caption}</caption>" if caption else ""
        return f'<table class="wikitable">{cap}{body}</table>'

    def inline(self, text: str) -> str:
        """Links, images, bold and italic of one line, as HTML."""
        links: list[str] = []

        def hold(fragment: str) -> str:
            links.append(fragment)
            return f"\x01{len(links) - 1}\x01"

        def image(match: re.Match[str]) -> str:
            options = [o.strip() for o in match.group(2).split("|") if o.strip()]
            caption = next(
                (
                    o
                    for o in reversed(options)
                    if not re.match(
                        r"^(thumb|frame|left|right|"
                        r"center|none|upright|border|frameless|\d+px|x?\d+x?\d*px|alt=|link=)",
                        o,
                    )
                ),
                "",
            )
            name = html.escape(match.group(1).strip(), quote=True)
            alt = html.escape(caption, quote=True)
            return hold(f'<img src="{name}" alt="{alt}"/>')

        def wiki_link(match: re.Match[str]) -> str:
            target, label = match.group(1).strip(), (match.group(2) or "").strip()
            shown = label or target.lstrip(":")
            page = target.lstrip(":").split("#")[0]
            href = article_address(self.article_url or "$1", page)
            return hold(f'<a href="{html.escape(href, quote=True)}">{html.escape(shown)}</a>')

        def external_link(match: re.Match[str]) -> str:
            url, label = match.group(1), (match.group(2) or match.group(1)).strip()
            return hold(f'<a href="{html.escape(url, quote=True)}">{html.escape(label)}</a>')

        text = _FILE_LINK.sub(image, text)
        text = _WIKI_LINK.sub(wiki_link, text)
        text = _EXTERNAL_LINK.sub(external_link, text)
        text = _escape_text(_ALLOWED_TAG.sub(lambda m: hold(m.group(0)), text))
        text = _BOLD_ITALIC.sub(r"<b><i>\1</i></b>", text)
        text = _BOLD.sub(r"<b>\1</b>", text)
        text = _ITALIC.sub(r"<i>\1</i>", text)
        return re.sub("\x01(\\d+)\x01", lambda m: links[int(m.group(1))], text)


def _escape_text(text: str) -> str:
    """HTML-escape wikitext, keeping its character entities (`&lt;`, `&nbsp;`, `&#91;`)."""
    return _BARE_AMPERSAND.sub("&amp;", text).replace("<", "&lt;").replace(">", "&gt;")


def _cell_content(cell: str) -> str:
    """A table cell without its attributes (`style="…" | text` → `text`)."""
    parts = _split_outside_links(cell, "|")
    if len(parts) > 1 and "=" in parts[0] and "[[" not in parts[0]:
        return "|".join(parts[1:]).strip()
    return cell.strip()
