"""`rag ask` (answers with cited sources) and `rag mcp` (the knowledge tools for agents)."""

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from rag_pipeline.cli.common import cli_settings
from rag_pipeline.core.terminal import strip_controls
from rag_pipeline.settings import ConfigError

if TYPE_CHECKING:
    from rag_pipeline.answer.ask import Answer, Answerer
    from rag_pipeline.answer.context import AnswerContext


@contextmanager
def _errors_as_messages() -> Iterator[None]:
    """Known failures (configuration, model, database, LLM) print one line, not a traceback."""
    from psycopg import OperationalError

    from rag_pipeline.answer.llm import LLMError
    from rag_pipeline.cli.errors import error_message
    from rag_pipeline.core.embedding import EmbeddingModelError
    from rag_pipeline.store.migrations import ModelMismatchError
    from rag_pipeline.store.server import EmbeddedServerError

    try:
        yield
    except (ConfigError, EmbeddingModelError, ModelMismatchError, LLMError) as exc:
        raise click.ClickException(str(exc)) from exc
    except EmbeddedServerError as exc:
        raise click.ClickException(error_message(exc) or str(exc)) from exc
    except OperationalError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise click.ClickException(f"the vector database is unavailable: {first}") from exc


@click.command()
@click.argument("question")
@click.option("--source", "sources", multiple=True, help="Only this source type (repeatable).")
@click.option("--lang", "languages", multiple=True, help="Only this language, e.g. en_US or en.")
@click.option(
    "--provider",
    type=click.Choice(["auto", "anthropic", "openai"]),
    default=None,
    help="Which LLM answers (default RAG_LLM_PROVIDER, auto: Anthropic if its key is set).",
)
@click.option(
    "--model", default=None, help="Model name (default RAG_ANTHROPIC_MODEL / RAG_OPENAI_MODEL)."
)
@click.option(
    "--top-k",
    "-k",
    type=click.IntRange(1, 50),
    default=None,
    help="Sections to retrieve (default RAG_ASK_TOP_K).",
)
@click.option("--json", "as_json", is_flag=True, help="Print {answer, citations, usage} as JSON.")
def ask(
    question: str,
    sources: tuple[str, ...],
    languages: tuple[str, ...],
    provider: str | None,
    model: str | None,
    top_k: int | None,
    as_json: bool,
) -> None:
    """Answer QUESTION from the index with an LLM, citing the sources it used.

    With no LLM configured, prints the context it would send and how to configure one.
    """
    from rag_pipeline.answer.ask import Answerer, prepare
    from rag_pipeline.answer.llm import ChatProvider, configuration_hint, resolve_provider
    from rag_pipeline.cli.endpoint import endpoint_notice
    from rag_pipeline.search import Searcher
    from rag_pipeline.store.runtime import load_embedder

    settings = cli_settings()
    with _errors_as_messages():
        config = resolve_provider(settings, provider=provider, model=model)
        endpoint = endpoint_notice(config) if config else None
        if endpoint:
            _notice(endpoint)
        # Fail on a bad provider setting before the costlier retrieval.
        chat = ChatProvider(config, on_retry=_notice) if config else None
        try:
            context = prepare(
                Searcher(settings),
                question,
                top_k=top_k or settings.ask_top_k,
                budget=settings.llm_context_tokens,
                count_tokens=load_embedder(settings).count_tokens,
                source_types=sources,
                languages=languages,
            )
        except ValueError as exc:  # search's own refusal, e.g. an empty or over-long question
            raise click.ClickException(str(exc)) from exc
        if chat is None:
            hint = configuration_hint(None if provider in (None, "auto") else provider)
            _print_context_only(question, context, hint, as_json)
            return
        if not context.sources:
            message = (
                "nothing in the index matches the question (is anything ingested? `rag status`)"
            )
            if as_json:
                _print_json({"answer": None, "citations": [], "usage": None, "error": message})
                return
            raise click.ClickException(message)
        try:
            answer = _answer(Answerer(chat), question, context, stream=not as_json)
        finally:
            chat.close()
    if as_json:
        _print_json(_answer_json(answer, chat, context))
    else:
        _print_sources(answer)


def _print_context_only(question: str, context: "AnswerContext", hint: str, as_json: bool) -> None:
    """No LLM is configured: what would be sent, and how to configure one."""
    if as_json:
        _print_json(
            {
                "answer": None,
                "citations": [],
                "usage": None,
                "system": context.system,
                "context": context.text,
                "context_tokens": context.tokens,
                "hint": hint,
            }
        )
        return
    click.secho("System prompt:", bold=True)
    click.echo(context.system)
    click.secho(
        f"\nContext ({len(context.sources)} section(s), about {context.tokens} of "
        f"{context.budget} tokens):",
        bold=True,
    )
    click.echo(context.user_message(question) if context.sources else "(empty)")
    click.secho(f"\n{hint}", fg="yellow", err=True)


def _answer_json(answer: "Answer", chat: Any, context: "AnswerContext") -> dict[str, Any]:
    return {
        "answer": answer.text,
        "citations": [
            {
                "n": c.n,
                "title": c.title,
                "url": c.url,
                "source_type": c.source_type,
                "source_id": c.source_id,
            }
            for c in answer.citations
        ],
        "usage": {
            "input_tokens": answer.usage.input_tokens,
            "output_tokens": answer.usage.output_tokens,
            "provider": chat.config.provider,
            "model": chat.config.model,
            "context_tokens": context.tokens,
        },
    }


def _print_sources(answer: "Answer") -> None:
    if not answer.citations:
        click.secho("\n(the answer cites no source)", fg="yellow")
        return
    click.secho("\nSources:", bold=True)
    for c in answer.citations:
        where = c.title
        if c.section_title and c.section_title != c.title:
            where = f"{c.title} › {c.section_title}"
        # Titles and addresses come from indexed documents: printed like the answer, safely.
        click.echo(strip_controls(f"[{c.n}] {where}"))
        click.echo(strip_controls(f"    {c.url or f'{c.source_type}:{c.source_id}'}"))


def _answer(
    answerer: "Answerer", question: str, context: "AnswerContext", *, stream: bool
) -> "Answer":
    """The complete answer; with `stream`, its text goes to the terminal as it arrives."""
    from rag_pipeline.answer.ask import Answer

    if not stream:
        return answerer.answer(question, context)
    answer: Answer | None = None
    streamed = False
    try:
        for item in answerer.stream(question, context):
            if isinstance(item, Answer):
                answer = item
            else:
                click.echo(item, nl=False)
                sys.stdout.flush()  # token by token, not when the line ends
                streamed = True
    finally:
        if streamed:
            click.echo()  # an error line then starts on a line of its own
    assert answer is not None  # the stream always ends with the Answer
    return answer


def _notice(message: str) -> None:
    click.secho(message, fg="yellow", err=True)


def _print_json(value: dict[str, Any]) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2))


@click.command()
@click.option(
    "--http",
    "http_port",
    type=click.IntRange(1, 65535),
    default=None,
    help="Serve streamable HTTP on 127.0.0.1:PORT (path /mcp) instead of stdio; every request "
    "must carry 'Authorization: Bearer <token>' (RAG_MCP_TOKEN, else RAG_HOME/mcp-token).",
)
@click.option(
    "--show-token",
    is_flag=True,
    help="Print the HTTP server's token (creating RAG_HOME/mcp-token if needed) and exit.",
)
def mcp(http_port: int | None, show_token: bool) -> None:
    """Run the MCP server exposing the knowledge tools to AI agents (stdio by default).

    Tools: search_knowledge, get_knowledge_stats, find_ad_entity, lookup_development_docs,
    get_document_lineage.
    """
    from rag_pipeline.mcp.http import ensure_token
    from rag_pipeline.mcp.server import serve

    settings = cli_settings()
    if show_token:
        with _errors_as_messages():
            click.echo(ensure_token(settings).value)
        return
    if http_port is None:
        serve(settings)
        return
    with _errors_as_messages():
        token = ensure_token(settings)
    # The token itself stays off the terminal (scrollback, screen shares, CI logs): its file is
    # readable by the index's owner only, who is who should have it.
    click.echo(
        f"MCP server on http://127.0.0.1:{http_port}/mcp (Ctrl+C stops it); clients send "
        f"'Authorization: Bearer <token>', the token is in {token.origin} "
        "(`rag mcp --show-token` prints it)",
        err=True,
    )
    serve(settings, http_port=http_port, token=token.value)


def register(main: click.Group) -> None:
    """Add `ask` and `mcp` to the `rag` command group."""
    main.add_command(ask)
    main.add_command(mcp)
