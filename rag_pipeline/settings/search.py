"""The settings of answering: the LLM behind `rag ask`, search ranking, and search's bounds.

Three groups, in the order their fields take in `rag_pipeline.settings.Settings` (and in the
README's table): `AnswerSettings` (the LLM), `SearchSettings` (modes, fusion, vocabulary,
entity weights, the connection pool) and `SearchLimitSettings` (bounded inputs and ranking
overrides, enforced by `Searcher` at every entry point).
"""

from functools import cached_property
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings

from rag_pipeline.settings.parsers import parse_entity_weights
from rag_pipeline.settings.ranking import parse_overrides


class AnswerSettings(BaseSettings):
    """The LLM `rag ask` and the MCP tools use, and how much it is sent and may take."""

    # LLM: `rag ask` and the MCP tools. Provider keys and the OpenAI-compatible URL keep the
    # names every other tool reads, so one exported key serves them all.
    llm_provider: Literal["auto", "anthropic", "openai"] = Field(
        default="auto",
        description="Which LLM answers `rag ask`; auto = Anthropic if its key is set, else OpenAI.",
    )
    anthropic_model: str = Field(
        default="claude-sonnet-5", description="The Claude model `rag ask` uses."
    )
    openai_model: str = Field(default="llama3.1", description="The model asked at OPENAI_BASE_URL.")
    llm_context_tokens: Annotated[int, Field(ge=200, le=200_000)] = Field(
        default=6000, description="Token budget of the retrieved context sent with a question."
    )
    llm_max_answer_tokens: Annotated[int, Field(ge=16, le=64_000)] = Field(
        default=1024,
        description="Longest answer, in the LLM's tokens (answers are cut at 64 bytes per token).",
    )
    llm_timeout_seconds: Annotated[float, Field(gt=0, le=3600)] = Field(
        default=60.0,
        description="Longest wait for the next piece of answer text (keep-alives do not count).",
    )
    llm_retries: Annotated[int, Field(ge=0, le=10)] = Field(
        default=2,
        description="Retries of a rate-limited, failed or timed-out LLM call (before any token).",
    )
    ask_top_k: Annotated[int, Field(ge=1, le=50)] = Field(
        default=8, description="Sections retrieved for `rag ask`."
    )
    developer_categories: str = Field(
        default="Developer,Development,Plug-In",
        description="Comma-separated names marking developer documentation: a wiki page is one "
        "when a category (or front-matter tag or title) contains a name, ignoring case and '_'.",
    )
    anthropic_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("ANTHROPIC_API_KEY", "anthropic_api_key"),
        description="Anthropic's API key: `rag ask` with Claude.",
    )
    anthropic_base_url: str = Field(
        default="https://api.anthropic.com",
        validation_alias=AliasChoices("ANTHROPIC_BASE_URL", "anthropic_base_url"),
        description="Anthropic's API address (a proxy, or the test server).",
    )
    openai_base_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("OPENAI_BASE_URL", "openai_base_url"),
        description="Any OpenAI-compatible chat endpoint (Ollama, vLLM...) for `rag ask`.",
    )
    openai_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("OPENAI_API_KEY", "openai_api_key"),
        description="Its API key, if it needs one.",
    )


class SearchSettings(BaseSettings):
    """How search ranks: modes, fusion weights, vocabulary, entity weights, the pool."""

    search_mode: Literal["hybrid", "vector", "keyword"] = Field(
        default="hybrid", description="Default search mode."
    )
    search_fusion: Literal["tmm", "minmax", "rrf"] = Field(
        default="tmm", description="Hybrid fusion: scores over each leg's best, min-max, or RRF."
    )
    search_vector_weight: Annotated[float, Field(ge=0, le=100)] = Field(
        default=1.0, description="The vector leg's weight in hybrid fusion."
    )
    search_keyword_weight: Annotated[float, Field(ge=0, le=100)] = Field(
        default=1.0, description="The keyword leg's weight in hybrid fusion."
    )
    search_model_languages: str = Field(
        default="en",
        description="Language prefixes the embedding model understands, comma-separated "
        "('*' for a multilingual model); queries in other languages are compared with the "
        "second vector (RAG_MULTILINGUAL_MODEL), or lean on the keyword leg without it.",
    )
    search_cross_language_vector_weight: Annotated[float, Field(ge=0, le=100)] = Field(
        default=0.25,
        description="The vector leg's weight for a query in a language the model does not know,"
        " when no second vector serves it.",
    )
    search_vocabulary_weight: Annotated[float, Field(ge=0, le=1)] = Field(
        default=0.75,
        description="Weight of the iDempiere words the search vocabulary adds to a query "
        "(supplier -> business partner), shared by the words of one entry, against 1 for "
        "each word of the query; 0 turns the vocabulary off.",
    )
    search_vocabulary_similarity: Annotated[float, Field(gt=0, le=1)] = Field(
        default=0.5,
        description="Cosine from which a query of four words or more, in a language the model "
        "knows, in hybrid or vector mode, also takes the entry of the search vocabulary's "
        "phrase closest to it ('warned automatically whenever something happens in the data' "
        "is close to 'alert schedule' -> alert processor), as if one query word had named it; "
        "1 turns it off.",
    )
    search_typo_correction: bool = Field(
        default=True,
        description="Read a query word the index does not hold as the indexed word one typing "
        "error away ('comission' -> 'commission') in both legs.",
    )
    search_vocabulary_dir: Path | None = Field(
        default=None,
        description="Folder of <language>.tsv files ('user words<TAB>iDempiere words') added "
        "to the bundled search vocabulary.",
    )
    search_entity_weights: str = Field(
        default="table=0.8,tab=0.8,field=0.8,process=0.9",
        description="Hybrid, vector and keyword scores are multiplied by the weight of the "
        "document's entity_type ('entity=weight,...', others 1): a dictionary table, tab or "
        "field ranks below the window or process a question names, a process below a window "
        "unless the query asks to generate, run, calculate or report, or for work done "
        "automatically or in a batch.",
    )
    search_import_weight: Annotated[float, Field(gt=0, le=1)] = Field(
        default=0.8,
        description="Weight of a dictionary window or process that imports data (its title "
        "starts with 'Import'/'Importar') when the query does not ask to import, load or "
        "upload, and its inverse when it does: 'fixed assets' finds the Asset window before "
        "Import Fixed Assets, 'load the assets from a CSV' the other way round.",
    )
    search_sections_per_document: Annotated[int, Field(ge=0, le=1000)] = Field(
        default=1,
        description="Sections of one document listed before the next documents' (0: no limit); "
        "its further sections follow them.",
    )
    search_rrf_k: Annotated[int, Field(ge=1, le=1000)] = Field(
        default=60, description="k of reciprocal rank fusion (RAG_SEARCH_FUSION=rrf)."
    )
    search_ef_search: Annotated[int, Field(ge=10, le=1000)] = Field(
        default=100, description="HNSW candidate list of the vector leg (recall against speed)."
    )
    search_pool_size: Annotated[int, Field(ge=1, le=256)] = Field(
        default=8, description="Connections the search pool may open to the vector database."
    )
    search_pool_timeout: Annotated[float, Field(gt=0, le=3600)] = Field(
        default=30.0, description="Seconds a search waits for a free pooled connection."
    )
    search_query_cache_size: Annotated[int, Field(ge=0, le=1_000_000)] = Field(
        default=1024, description="Query vectors kept in memory per process (0: none)."
    )

    @field_validator("search_entity_weights")
    @classmethod
    def _entity_weights_parse(cls, value: str) -> str:
        parse_entity_weights(value)
        return value

    @cached_property
    def search_entity_weight_map(self) -> dict[str, float]:
        """RAG_SEARCH_ENTITY_WEIGHTS as entity type -> weight (parsed once, not per query)."""
        return parse_entity_weights(self.search_entity_weights)


class SearchLimitSettings(BaseSettings):
    """Bounds on what one search may ask, and overrides of ranking constants."""

    # Search: bounded inputs and ranking overrides (issue 36). Every entry point (Python API,
    # CLI, MCP, ask) goes through `Searcher`, which enforces these.
    search_max_query_chars: Annotated[int, Field(ge=1, le=100_000)] = Field(
        default=2000,
        description="Longest query searched, in characters; a longer one is refused with an "
        "error naming this setting.",
    )
    search_max_correction_letters: Annotated[int, Field(ge=5, le=100)] = Field(
        default=24,
        description="Longest word typo correction looks at; a longer word is searched as typed "
        "(its one-edit variants grow with its length: 104,000 for 2,000 letters).",
    )
    search_max_understood_words: Annotated[int, Field(ge=8, le=10_000)] = Field(
        default=64,
        description="Words of a query that typo correction, the search vocabulary and the "
        "embedding model read (the keyword leg reads every word): a longer query is understood "
        "by its first words.",
    )
    search_max_top_k: Annotated[int, Field(ge=1, le=10_000)] = Field(
        default=1000, description="Most hits one search may ask for (top_k)."
    )
    search_max_batch: Annotated[int, Field(ge=1, le=1_000_000)] = Field(
        default=10_000,
        description="Most queries one batch (`Searcher.search_batch`, `rag search --queries`) "
        "may hold; a longer batch is refused before any is searched.",
    )
    search_ranking: str = Field(
        default="",
        description="Overrides of ranking constants, 'name=value,...' (names and defaults: "
        "`rag search --explain`, rag_pipeline/settings/ranking.py), e.g. 'k1=1.2,b=0.75'.",
    )

    @field_validator("search_ranking")
    @classmethod
    def _ranking_parses(cls, value: str) -> str:
        parse_overrides(value)
        return value
