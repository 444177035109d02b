"""The context an LLM answers from: numbered sources within a token budget, and its instructions.

Decision: tokens are counted with the embedding model's tokenizer (`Embedder.count_tokens`),
which search has loaded already, so counting costs microseconds and no download. No tokenizer
of the answering LLM is available offline (Claude's is not published; a local model's varies),
so this count is an estimate: for English the all-MiniLM WordPiece count is within about 15 %
of a BPE tokenizer's, and for Slovak or Hungarian it is higher (WordPiece splits unknown words
into more pieces), which errs on the safe side. The default budget (RAG_LLM_CONTEXT_TOKENS,
6,000) is far below every current model's context window, so the margin absorbs the error.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rag_pipeline.search import SearchHit

TokenCounter = Callable[[str], int]

# A section cut to fit the budget keeps at least this much, or is left out: a few lines of a
# section mislead more than they help.
_MIN_PARTIAL_TOKENS = 80
_TRUNCATION_MARK = "\n[…]"

SYSTEM_PROMPT = """\
You answer questions about the iDempiere ERP for its users and developers.
Answer only from the numbered sources in the context below; do not use outside knowledge.
Cite every statement with the number of the source it comes from, in square brackets, e.g. [1] \
or [2][3]. Cite only numbers that appear in the context.
If the context does not contain the answer, say so plainly (in one or two sentences) instead of \
guessing, and mention what the sources do cover if it is related.
Answer in the language of the question, even when the sources are in another language.
Be concise: steps as a numbered list, window, tab and field names as they appear in the sources."""


@dataclass(frozen=True)
class ContextSource:
    """One numbered section in the context."""

    n: int
    title: str
    breadcrumb: str
    section_title: str
    url: str
    source_type: str
    source_id: str
    language: str
    text: str  # the section text as sent (possibly cut to fit the budget)
    truncated: bool


@dataclass(frozen=True)
class AnswerContext:
    """What is sent to the LLM besides the question: instructions and numbered sources."""

    system: str
    sources: tuple[ContextSource, ...]
    text: str  # the numbered sources as one block
    tokens: int  # `text` counted by the token counter
    budget: int

    def user_message(self, question: str) -> str:
        """The user turn: the context first, then the question (the order models handle best)."""
        return f"<context>\n{self.text}\n</context>\n\nQuestion: {question}"

    def source(self, n: int) -> ContextSource | None:
        """The source numbered `n`, if the context has it."""
        return self.sources[n - 1] if 1 <= n <= len(self.sources) else None


def build_context(
    hits: Sequence[SearchHit], *, budget: int, count_tokens: TokenCounter
) -> AnswerContext:
    """Number the hits' parent sections, best first, until the token budget is spent.

    A section that does not fit whole is cut at a line boundary when enough budget remains,
    otherwise it and every later one are left out, so the numbering stays gap-free.
    """
    sources: list[ContextSource] = []
    blocks: list[str] = []
    used = 0
    for hit in hits:
        n = len(sources) + 1
        header = _header(n, hit)
        body = (hit.parent_text or hit.text).strip()
        block = f"{header}\n{body}"
        cost = count_tokens(block)
        truncated = False
        if used + cost > budget:
            remaining = budget - used
            if remaining < _MIN_PARTIAL_TOKENS + count_tokens(header):
                break
            body = _cut_to_fit(header, body, remaining, count_tokens)
            if not body:
                break
            block = f"{header}\n{body}"
            cost = count_tokens(block)
            truncated = True
        sources.append(
            ContextSource(
                n=n,
                title=hit.title,
                breadcrumb=hit.breadcrumb,
                section_title=hit.section_title,
                url=hit.url,
                source_type=hit.source_type,
                source_id=hit.source_id,
                language=hit.language,
                text=body,
                truncated=truncated,
            )
        )
        blocks.append(block)
        used += cost
        if truncated:
            break
    text = "\n\n".join(blocks)
    return AnswerContext(
        system=SYSTEM_PROMPT,
        sources=tuple(sources),
        text=text,
        tokens=count_tokens(text) if text else 0,
        budget=budget,
    )


def _header(n: int, hit: SearchHit) -> str:
    path = " › ".join(p for p in (hit.title, hit.breadcrumb, hit.section_title) if p)
    lines = [f"[{n}] {path}"]
    if hit.url:
        lines.append(f"URL: {hit.url}")
    lines.append(f"Source: {hit.source_type} {hit.source_id} ({hit.language})")
    return "\n".join(lines)


def _cut_to_fit(header: str, body: str, budget: int, count_tokens: TokenCounter) -> str:
    """The longest prefix of `body` that fits `budget` with its header and the cut mark.

    Whole lines first; a first line too long on its own (one long paragraph) is cut at words.
    """
    lines = body.split("\n")
    kept = _longest_prefix(header, lines, "\n", budget, count_tokens)
    if kept == 0:
        words = lines[0].split(" ")
        kept = _longest_prefix(header, words, " ", budget, count_tokens)
        return " ".join(words[:kept]) + _TRUNCATION_MARK if kept else ""
    return "\n".join(lines[:kept]) + _TRUNCATION_MARK


def _longest_prefix(
    header: str, pieces: list[str], separator: str, budget: int, count_tokens: TokenCounter
) -> int:
    """How many leading `pieces` fit (binary search: a count costs a tokenizer call)."""
    low, high = 0, len(pieces)  # invariant: `low` pieces fit
    while low < high:
        middle = (low + high + 1) // 2
        candidate = separator.join(pieces[:middle]) + _TRUNCATION_MARK
        if count_tokens(f"{header}\n{candidate}") <= budget:
            low = middle
        else:
            high = middle - 1
    return low
