"""Answers with cited sources: retrieve, build the numbered context, stream the LLM's answer.

`prepare` runs the retrieval half (it also serves `rag ask` with no LLM configured, which shows
the context it would send); `Answerer.stream` adds the answer. Citations are the `[n]` markers
the answer actually uses, mapped back to the sources they number — a source that was sent but
never cited is not listed.
"""

import re
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from rag_pipeline.answer.context import AnswerContext, TokenCounter, build_context
from rag_pipeline.answer.llm import ChatProvider, StreamEnd, TextDelta, Usage
from rag_pipeline.search import Searcher

# `[1]`, `[1, 3]`, `[2;4]`, `[1-3]`: the forms models use when told to cite by number.
_CITATION = re.compile(r"\[(\d+(?:\s*(?:[,;]|-|–)\s*\d+)*)\]")
_RANGE_LIMIT = 50  # `[1-9999]` is a typo, not fifty thousand citations
# An answer draws on a page's two best sections before the next page's: the section after the
# one that matched best often holds the steps (a search lists distinct documents first).
_SECTIONS_PER_DOCUMENT = 2


@dataclass(frozen=True)
class Citation:
    """A source the answer cites."""

    n: int
    title: str
    url: str
    source_type: str
    source_id: str
    breadcrumb: str
    section_title: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        return asdict(self)


@dataclass(frozen=True)
class Answer:
    """A complete answer: its text, the sources it cites, and the provider's token counts."""

    text: str
    citations: tuple[Citation, ...]
    usage: Usage
    stop_reason: str | None


def prepare(
    searcher: Searcher,
    question: str,
    *,
    top_k: int,
    budget: int,
    count_tokens: TokenCounter,
    source_types: Sequence[str] | None = None,
    languages: Sequence[str] | None = None,
) -> AnswerContext:
    """Retrieve the best sections for `question` and number them within the token budget."""
    hits = searcher.search(
        question,
        top_k=top_k,
        source_types=source_types or None,
        languages=languages or None,
        sections_per_document=_SECTIONS_PER_DOCUMENT,
    )
    return build_context(hits, budget=budget, count_tokens=count_tokens)


def cited_numbers(answer: str, *, available: int) -> list[int]:
    """Source numbers cited in `answer`, in order of first citation, within 1..available."""
    found: dict[int, None] = {}
    for match in _CITATION.finditer(answer):
        for part in re.split(r"\s*[,;]\s*", match[1]):
            bounds = re.split(r"\s*[-–]\s*", part)
            low, high = int(bounds[0]), int(bounds[-1])
            if high < low or high - low > _RANGE_LIMIT:
                high = low
            for n in range(low, high + 1):
                if 1 <= n <= available:
                    found.setdefault(n, None)
    return list(found)


def citations_for(answer: str, context: AnswerContext) -> tuple[Citation, ...]:
    """The context's sources that `answer` cites, in order of first citation."""
    result: list[Citation] = []
    for n in cited_numbers(answer, available=len(context.sources)):
        source = context.source(n)
        if source is not None:
            result.append(
                Citation(
                    n=n,
                    title=source.title,
                    url=source.url,
                    source_type=source.source_type,
                    source_id=source.source_id,
                    breadcrumb=source.breadcrumb,
                    section_title=source.section_title,
                )
            )
    return tuple(result)


class Answerer:
    """Streams an answer to one question from a prepared context."""

    def __init__(self, provider: ChatProvider) -> None:
        """Answer with `provider`."""
        self.provider = provider

    def stream(self, question: str, context: AnswerContext) -> Iterator[str | Answer]:
        """Yield the answer's text piece by piece, then the complete `Answer` (last item).

        Raises:
            LLMError: the provider failed (one line, without the API key).
        """
        pieces: list[str] = []
        end: StreamEnd | None = None
        for event in self.provider.stream(context.system, context.user_message(question)):
            if isinstance(event, TextDelta):
                pieces.append(event.text)
                yield event.text
            else:
                end = event
        text = "".join(pieces)
        yield Answer(
            text=text,
            citations=citations_for(text, context),
            usage=end.usage if end else Usage(),
            stop_reason=end.stop_reason if end else None,
        )

    def answer(self, question: str, context: AnswerContext) -> Answer:
        """The complete answer, without streaming."""
        result: Answer | None = None
        for item in self.stream(question, context):
            if isinstance(item, Answer):
                result = item
        assert result is not None  # `stream` always ends with the Answer
        return result
