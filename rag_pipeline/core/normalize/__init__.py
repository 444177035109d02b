"""Every source format to one canonical CommonMark/GFM style (seed ADR-040).

Each format is converted to Markdown by its own module (`editorjs`, `html`, `text`; Markdown
is already Markdown), and everything then goes through the same canonical re-emit
(`markdown.canonicalize`). That last shared step is what makes one article written in
Editor.js, GFM or HTML come out byte-identical.
"""

from typing import Any

from rag_pipeline.core.frontmatter import front_matter_block
from rag_pipeline.core.models import SourceFormat
from rag_pipeline.core.normalize.document import MarkdownDocument, NormalizationError
from rag_pipeline.core.normalize.editorjs import editorjs_to_tree
from rag_pipeline.core.normalize.html import convert_tree, html_to_markdown, prepare_tree
from rag_pipeline.core.normalize.markdown import canonicalize_with_heading
from rag_pipeline.core.normalize.text import text_to_markdown
from rag_pipeline.core.workers import DeadlineExceededError, thread_runner

__all__ = [
    "DEFAULT_TIME_BUDGET_SECONDS",
    "MarkdownDocument",
    "NormalizationError",
    "SourceFormat",
    "to_markdown",
]


def conversion_stopped(
    source_format: SourceFormat, error: BaseException, seconds: float | None
) -> NormalizationError:
    """The error of a conversion whose process was killed at its deadline or died under it."""
    if isinstance(error, DeadlineExceededError):
        return NormalizationError(
            f"{source_format.value} document took more than {seconds:g} s to "
            "convert (RAG_MAX_CONVERT_SECONDS)"
        )
    # Killed from outside, or out of memory.
    return NormalizationError(f"{source_format.value} document could not be converted: {error}")


def _convert_call(call: tuple[str, SourceFormat, str | None]) -> MarkdownDocument:
    return _convert(*call)


def _convert(body: str, fmt: SourceFormat, base_url: str | None) -> MarkdownDocument:
    metadata: dict[str, Any]
    if fmt is SourceFormat.EDITORJS:
        tree, metadata = editorjs_to_tree(body)
        prepare_tree(tree)
        raw = convert_tree(tree)
    elif fmt is SourceFormat.HTML:
        raw, metadata = html_to_markdown(body)
    elif fmt is SourceFormat.TEXT:
        raw, metadata, base_url = text_to_markdown(body), {}, None
    else:
        front_matter, rest = front_matter_block(body)
        markdown, heading = canonicalize_with_heading(rest, base_url=base_url)
        if front_matter:
            markdown = f"{front_matter}\n\n{markdown}" if markdown else f"{front_matter}\n"
        return MarkdownDocument(markdown, {"front_matter": bool(front_matter)}, heading)
    markdown, heading = canonicalize_with_heading(raw, base_url=base_url)
    return MarkdownDocument(markdown, metadata, heading)


# Conversion is linear but can be slow on hostile input; past this a document fails alone.
DEFAULT_TIME_BUDGET_SECONDS = 30.0
# Imported by the conversion process before its first document is timed.
_CONVERTERS = "rag_pipeline.core.normalize"


def to_markdown(
    body: str,
    fmt: SourceFormat,
    *,
    base_url: str | None = None,
    time_budget_seconds: float | None = DEFAULT_TIME_BUDGET_SECONDS,
) -> MarkdownDocument:
    """Convert a document body to canonical GFM.

    Args:
        body: The document in `fmt`: Editor.js saved-data JSON, HTML (a page or a fragment,
            e.g. MediaWiki `action=parse` output), GFM, or plain text.
        fmt: The format of `body`.
        base_url: The address the document was published at; relative link and image
            targets are resolved against it (left as they are when None).
        time_budget_seconds: Most seconds the conversion may take (None: no limit); past it
            the document fails with NormalizationError (RAG_MAX_CONVERT_SECONDS). With a
            limit, conversion runs in a child process of the calling thread, killed when
            the time is up (the parsers cannot be interrupted otherwise).

    Returns:
        The canonical Markdown (ending with one newline, "" when there is no content) and
        JSON-serialisable metadata about the conversion.

    Raises:
        NormalizationError: The body is malformed (invalid Editor.js JSON, a block without a
            type …) or the format is unknown; the message says what to fix.
    """
    # Callers outside the type checker (JSON from a database) may hand over anything.
    if not isinstance(body, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise NormalizationError(f"document body must be text, got {type(body).__name__}")
    try:
        source_format = SourceFormat(fmt)
    except ValueError as error:
        known = ", ".join(f.value for f in SourceFormat)
        raise NormalizationError(
            f"unknown source format {fmt!r}; expected one of {known}"
        ) from error
    try:
        if time_budget_seconds is None:
            return _convert(body, source_format, base_url)
        runner = thread_runner(_CONVERTERS)
        call = (body, source_format, base_url)
        return runner.call(_convert_call, call, time_budget_seconds)
    except (DeadlineExceededError, ChildProcessError) as error:
        raise conversion_stopped(source_format, error, time_budget_seconds) from None
    except RecursionError as error:
        # Converters and the Markdown parser recurse per nesting level of the document.
        raise NormalizationError(
            f"{source_format.value} document is nested too deeply to be converted"
        ) from error
