"""One typed place for configuration: environment variables, validated, read when asked.

Nothing here reads the environment at import time: `load_settings()` is called when a command
or a resource starts, so a changed variable is seen by the next run, not frozen at code load.
"""

import os
import re
from functools import cached_property
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import quote

from pydantic import (
    AliasChoices,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

BUNDLED_MODEL = "all-MiniLM-L6-v2-int8"
# An iDempiere AD_Language code: en_US, es_CO, sk_SK, pt_BR …
_AD_LANGUAGE = re.compile(r"[a-z]{2,3}_[A-Z]{2}")
# An id in a list setting: ASCII digits only ('²'.isdigit() is True, and int('٣') is 3).
_ASCII_ID = re.compile(r"[0-9]{1,18}")


class ConfigError(ValueError):
    """Invalid configuration; the message names the environment variable to fix."""


class Settings(BaseSettings):
    """Every setting of rag_pipeline, from `RAG_*` environment variables (or a `.env` file)."""

    model_config = SettingsConfigDict(
        env_prefix="RAG_", env_file=".env", env_file_encoding="utf-8", extra="ignore"
    )

    home: Path = Field(
        default_factory=lambda: Path.home() / ".rag_pipeline",
        description="Where the embedded database, model links and Dagster state live.",
    )
    vectordb_url: str | None = Field(
        default=None, description="postgresql:// URL of an external PostgreSQL with pgvector."
    )
    vectordb_pg_host: str | None = Field(
        default=None,
        description="An external PostgreSQL's host, instead of a URL (with the four below).",
    )
    vectordb_pg_port: Annotated[int, Field(ge=1, le=65535)] = Field(
        default=5432, description="Its port."
    )
    vectordb_pg_name: str = Field(default="rag", description="Its database.")
    vectordb_pg_user: str = Field(default="postgres", description="Its user.")
    vectordb_pg_password: str | None = Field(default=None, description="Its password.")

    embedding_model: str = Field(
        default=BUNDLED_MODEL,
        description="The bundled model, any fastembed model name, or a name for a local folder.",
    )
    embedding_model_path: Path | None = Field(
        default=None, description="A local folder with model.onnx and tokenizer files."
    )
    embedding_allow_download: bool = Field(
        default=False, description="Let fastembed fetch a named model it does not have yet."
    )
    embedding_threads: Annotated[int, Field(ge=1, le=256)] | None = Field(
        default=None, description="ONNX Runtime inference threads (default: ONNX Runtime's choice)."
    )
    embedding_batch_size: Annotated[int, Field(ge=1, le=4096)] = Field(
        default=64, description="Texts per inference batch."
    )
    embedding_batch_tokens: Annotated[int, Field(ge=256, le=1_048_576)] = Field(
        default=1024, description="Padded tokens per inference batch: bounds the model's memory."
    )
    embedding_max_tokens: Annotated[int, Field(ge=16, le=8192)] | None = Field(
        default=None, description="Override of the model's maximum sequence length."
    )

    workers: Annotated[int, Field(ge=1, le=256)] | None = Field(
        default=None, description="Processes for format conversion (default: CPU count, max 8)."
    )
    chunk_target_tokens: Annotated[int, Field(ge=16, le=8192)] = Field(
        default=200,
        description="Chunk size aimed at, in the model's tokens (never above its maximum).",
    )
    chunk_overlap_sentences: Annotated[int, Field(ge=0, le=10)] = Field(
        default=1, description="Sentences repeated at the start of the next chunk of a section."
    )

    files_max_bytes: Annotated[int, Field(ge=1)] = Field(
        default=5 * 1024 * 1024, description="Larger files are recorded as failed, not read."
    )
    # Cost caps per document (issue 14): past them the document fails with the reason.
    max_chunks_per_document: Annotated[int, Field(ge=1)] = Field(
        default=2000, description="A document needing more chunks fails alone."
    )
    max_chunk_chars: Annotated[int, Field(ge=256)] = Field(
        default=6000, description="Characters per chunk at most (a huge 'word' is cut too)."
    )
    max_convert_seconds: Annotated[float, Field(gt=0)] = Field(
        default=30.0,
        description="A document whose conversion or chunking takes longer fails alone.",
    )
    files_folders: str = Field(
        default="demo",
        description="Folders the files sensor watches, separated by ':' ('demo' = bundled corpus).",
    )

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

    # wiki
    wiki_api_url: str | None = Field(
        default=None,
        description="MediaWiki api.php URL (e.g. https://wiki.idempiere.org/w-en/api.php); "
        "unset = the demo XML export shipped in the package (offline).",
    )
    wiki_categories: str = Field(
        default="Developer,New_Features",
        description="Comma-separated categories, with or without 'Category:'. The iDempiere "
        "wiki names them per release, e.g. New_Features_v11, Plug-In_Development.",
    )
    wiki_pages: str = Field(default="", description="Comma-separated explicit page titles.")
    wiki_namespaces: str = Field(
        default="0", description="Comma-separated namespace ids whose pages are indexed."
    )
    wiki_category_depth: Annotated[int, Field(ge=0, le=10)] = Field(
        default=2, description="How many levels of subcategories are followed (0 = none)."
    )
    wiki_max_concurrency: Annotated[int, Field(ge=1, le=16)] = Field(
        default=4, description="Parallel requests to the wiki (be polite: keep it small)."
    )
    wiki_user_agent: str = Field(
        default="rag_pipeline/0.1 (iDempiere knowledge index; https://www.idempiere.org)",
        description="User-Agent sent to the wiki (its policy asks for a contact).",
    )

    @field_validator("wiki_api_url")
    @classmethod
    def _wiki_url_is_http(cls, value: str | None) -> str | None:
        if value and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http(s):// URL of api.php")
        return value or None

    @field_validator("wiki_namespaces")
    @classmethod
    def _namespaces_are_ids(cls, value: str) -> str:
        parts = [p.strip() for p in value.split(",") if p.strip()]
        if not parts or not all(_ASCII_ID.fullmatch(p.removeprefix("-")) for p in parts):
            raise ValueError("must be comma-separated namespace numbers, e.g. 0 or 0,4")
        return value

    # iDempiere: the database the k_entry and ad_metadata sources read (read-only). The
    # IDEMPIERE_DB_* names are the seeds' (ADR-021), without the RAG_ prefix; none set = the
    # demo iDempiere database created in the embedded server.
    idempiere_db_host: str | None = Field(
        default=None,
        validation_alias=AliasChoices("IDEMPIERE_DB_HOST", "idempiere_db_host"),
        description="Host of the iDempiere PostgreSQL; unset = the bundled demo database.",
    )
    idempiere_db_port: Annotated[int, Field(ge=1, le=65535)] = Field(
        default=5432,
        validation_alias=AliasChoices("IDEMPIERE_DB_PORT", "idempiere_db_port"),
        description="The iDempiere database's port.",
    )
    idempiere_db_name: str = Field(
        default="idempiere",
        validation_alias=AliasChoices("IDEMPIERE_DB_NAME", "idempiere_db_name"),
        description="The iDempiere database's name.",
    )
    idempiere_db_user: str = Field(
        default="adempiere",
        validation_alias=AliasChoices("IDEMPIERE_DB_USER", "idempiere_db_user"),
        description="Its user (read through a read-only connection).",
    )
    idempiere_db_password: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("IDEMPIERE_DB_PASSWORD", "idempiere_db_password"),
        description="Its password.",
    )
    languages: str = Field(
        default="all",
        description="Comma-separated AD_Language codes indexed by k_entry and ad_metadata; "
        "'all' (the default) = the base language plus every language with translations "
        "that AD_Language marks an active system language (where it has that flag).",
    )
    kentry_client_ids: str = Field(
        default="1000014,11",
        description="Comma-separated AD_Client_IDs whose knowledge-base entries are indexed "
        "(1000014 as in the seed, 11 = the demo database's client).",
    )

    @field_validator("languages")
    @classmethod
    def _languages_are_codes(cls, value: str) -> str:
        parts = [p.strip() for p in value.split(",") if p.strip()]
        if parts == ["all"]:
            return "all"
        if not parts or not all(_AD_LANGUAGE.fullmatch(p) for p in parts):
            raise ValueError("must be comma-separated AD_Language codes like en_US,es_CO, or all")
        return ",".join(dict.fromkeys(parts))

    @field_validator("kentry_client_ids")
    @classmethod
    def _client_ids_are_numbers(cls, value: str) -> str:
        parts = [p.strip() for p in value.split(",") if p.strip()]
        if not parts or not all(_ASCII_ID.fullmatch(p) for p in parts):
            raise ValueError("must be comma-separated AD_Client_ID numbers, e.g. 1000014,11")
        return ",".join(dict.fromkeys(parts))

    @property
    def language_list(self) -> list[str]:
        """The configured AD_Language codes (`['all']` when every language is wanted)."""
        return self.languages.split(",")

    @property
    def kentry_client_id_list(self) -> list[int]:
        """The AD_Client_IDs whose knowledge-base entries are indexed."""
        return [int(p) for p in self.kentry_client_ids.split(",")]

    @property
    def idempiere_conninfo(self) -> str | None:
        """The URL of the configured iDempiere database; None = use the demo database."""
        if self.idempiere_db_host is None:
            return None
        auth = quote(self.idempiere_db_user, safe="")
        if self.idempiere_db_password is not None:
            auth += ":" + quote(self.idempiere_db_password.get_secret_value(), safe="")
        return (
            f"postgresql://{auth}@{self.idempiere_db_host}:{self.idempiere_db_port}/"
            f"{quote(self.idempiere_db_name, safe='')}"
        )

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
        "('*' for a multilingual model); queries in other languages lean on the keyword leg.",
    )
    search_cross_language_vector_weight: Annotated[float, Field(ge=0, le=100)] = Field(
        default=0.25,
        description="The vector leg's weight for a query in a language the model does not know.",
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

    # Running it like production (rag_pipeline/defs/schedules.py, executors.py).
    nightly_cron: str = Field(
        default="30 2 * * *", description="Cron of each source's nightly full reconcile."
    )
    timezone: str = Field(default="UTC", description="IANA time zone of the nightly cron.")
    automation: bool = Field(
        default=False,
        description="Start the nightly schedules and the automation sensor with the daemon "
        "(off in local dev: turn them on in the UI, or set this in production).",
    )
    executor: Literal["in_process", "multiprocess", "celery"] = Field(
        default="in_process",
        description="Executor of the jobs: in_process (default), multiprocess, celery.",
    )
    celery_broker: str = Field(
        default="pyamqp://guest:guest@127.0.0.1:5672//",
        description="Celery broker URL (RabbitMQ or redis://) when RAG_EXECUTOR=celery.",
    )
    celery_backend: str = Field(
        default="rpc://", description="Celery result backend when RAG_EXECUTOR=celery."
    )
    run_timeout_seconds: Annotated[int, Field(ge=60)] = Field(
        default=4 * 3600,
        description="A run still going after this long is stopped (dagster/max_runtime).",
    )

    @property
    def files_folder_list(self) -> list[str]:
        """The configured folders, in order, without empty entries or repeats."""
        return list(dict.fromkeys(p.strip() for p in self.files_folders.split(":") if p.strip()))

    @field_validator("vectordb_url")
    @classmethod
    def _url_is_postgres(cls, value: str | None) -> str | None:
        if value and not value.startswith(("postgresql://", "postgres://")):
            raise ValueError("must start with postgresql://")
        return value or None

    @field_validator("search_entity_weights")
    @classmethod
    def _entity_weights_parse(cls, value: str) -> str:
        parse_entity_weights(value)
        return value

    @cached_property
    def search_entity_weight_map(self) -> dict[str, float]:
        """RAG_SEARCH_ENTITY_WEIGHTS as entity type -> weight (parsed once, not per query)."""
        return parse_entity_weights(self.search_entity_weights)

    @model_validator(mode="after")
    def _folders_exist(self) -> "Settings":
        for variable, folder in (
            ("RAG_EMBEDDING_MODEL_PATH", self.embedding_model_path),
            ("RAG_SEARCH_VOCABULARY_DIR", self.search_vocabulary_dir),
        ):
            if folder is not None and not folder.is_dir():
                raise ValueError(f"{variable}: {folder} is not a folder")
        return self

    @property
    def effective_workers(self) -> int:
        """Processes for CPU-bound per-document stages."""
        return self.workers or min(os.cpu_count() or 1, 8)

    @property
    def uses_embedded_database(self) -> bool:
        """True when no external vector database is configured."""
        return self.vectordb_url is None and self.vectordb_pg_host is None

    @cached_property
    def external_conninfo(self) -> str | None:
        """The connection URL of the configured external database, if any."""
        if self.vectordb_url:
            return self.vectordb_url
        if self.vectordb_pg_host is None:
            return None
        auth = quote(self.vectordb_pg_user, safe="")
        if self.vectordb_pg_password:
            auth += ":" + quote(self.vectordb_pg_password, safe="")
        return (
            f"postgresql://{auth}@{self.vectordb_pg_host}:{self.vectordb_pg_port}/"
            f"{quote(self.vectordb_pg_name, safe='')}"
        )

    # HTTP clients bounded (issue 38): the wiki client and the LLM client.
    wiki_max_bytes: Annotated[int, Field(ge=1024, le=1024**3)] = Field(
        default=2 * 1024 * 1024,
        description="Largest wiki page indexed, in bytes of rendered HTML (or an export's "
        "wikitext); larger pages are recorded as failed. API responses are cut at 4 times "
        "this plus 1 MiB.",
    )
    wiki_max_listing_requests: Annotated[int, Field(ge=1, le=1_000_000)] = Field(
        default=1000,
        description="Requests one wiki listing (a category, a revision batch, a change poll) "
        "may make following `continue` (500 entries each) before it fails.",
    )
    wiki_listing_timeout_seconds: Annotated[float, Field(gt=0, le=86_400)] = Field(
        default=900.0, description="Seconds one wiki listing may take, retries included."
    )
    llm_deadline_seconds: Annotated[float, Field(gt=0, le=86_400)] = Field(
        default=300.0,
        description="Seconds one LLM answer may take in all, retries and waits included; "
        "keep-alive bytes do not extend it (RAG_LLM_TIMEOUT_SECONDS is the longest wait "
        "for the next piece of answer text).",
    )

    # The agent server and search connections, hardened (issue 38: `rag mcp --http` token and
    # session caps, bounded statements, reconnection).
    mcp_token: SecretStr | None = Field(
        default=None,
        description="The bearer token `rag mcp --http` requires (at least 16 characters); "
        "unset = a random one generated into RAG_HOME/mcp-token (mode 0600) on first use.",
    )
    mcp_max_sessions: Annotated[int, Field(ge=1, le=10_000)] = Field(
        default=64,
        description="Open sessions of `rag mcp --http` in total; at the cap a new session "
        "closes the one idle longest (503 only while every session has a request running).",
    )
    mcp_max_sessions_per_client: Annotated[int, Field(ge=1, le=10_000)] = Field(
        default=8,
        description="Open sessions of one client (its address and the name it gives at "
        "initialize); past it the client's own idle-longest session is closed.",
    )
    mcp_session_idle_seconds: Annotated[float, Field(ge=5, le=86_400)] = Field(
        default=300.0,
        description="A session of `rag mcp --http` with no request for this long is closed.",
    )
    search_statement_timeout_ms: Annotated[int, Field(ge=100, le=3_600_000)] = Field(
        default=5000,
        description="Milliseconds a statement of a search or agent tool may run before the "
        "server cancels it (statement_timeout of every search connection).",
    )

    @field_validator("mcp_token")
    @classmethod
    def _mcp_token_is_long(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value().strip():
            return None
        token = value.get_secret_value().strip()
        if len(token) < 16 or any(c.isspace() or not c.isprintable() for c in token):
            raise ValueError("must be at least 16 printable characters without spaces")
        return SecretStr(token)

    # Document lineage and history (issue 35: `rag show`, rag.document_versions).
    history_versions: Annotated[int, Field(ge=0, le=100)] = Field(
        default=3,
        description="Earlier versions of each document kept besides the "
        "current one (0 to 100; 0 keeps only the current version's lineage); the oldest is "
        "pruned when a document changes.",
    )
    dagster_ui_url: str | None = Field(
        default=None,
        description="Base URL of the Dagster webserver (e.g. "
        "http://127.0.0.1:3000); `rag show` then prints each run's URL.",
    )

    @field_validator("dagster_ui_url")
    @classmethod
    def _ui_url_is_http(cls, value: str | None) -> str | None:
        if value and not value.startswith(("http://", "https://")):
            raise ValueError("RAG_DAGSTER_UI_URL must start with http:// or https://")
        return value.rstrip("/") if value else None

    # Orchestrated through Dagster (issue 34: orchestration/checks.py, executors.py).
    freshness_hours: str = Field(
        default="26",
        description="Hours within which each source's index must have synced, else Dagster's "
        "freshness policy marks it failing: one number for every source, then `source=hours` "
        "exceptions, e.g. `26,wiki=6` (the nightly reconcile plus two hours by default).",
    )
    ad_entity_types: str = Field(
        default="table,window,tab,field,process",
        description="Entity types of the Application Dictionary indexed, comma-separated "
        "(CI may index `table` alone).",
    )
    embedding_concurrency: Annotated[int, Field(ge=1, le=64)] | None = Field(
        default=None,
        description="Steps running at once in each concurrency pool of the Dagster instance "
        "(the `embedding` pool of every embeddings step, each source's `<source>_requests` "
        "pool); unset: no limit, so a killed run never leaves a slot taken on a laptop.",
    )

    @field_validator("freshness_hours")
    @classmethod
    def _freshness_hours_parse(cls, value: str) -> str:
        try:
            parse_freshness_hours(value)
        except ValueError as exc:
            raise ValueError(str(exc)) from None
        return value

    def freshness_windows(self) -> dict[str, float]:
        """Source → freshness window in hours; the key "" holds the default."""
        return parse_freshness_hours(self.freshness_hours)

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
        "`rag search --explain`, rag_pipeline/search/ranking.py), e.g. 'k1=1.2,b=0.75'.",
    )

    @field_validator("search_ranking")
    @classmethod
    def _ranking_parses(cls, value: str) -> str:
        from rag_pipeline.search.ranking import parse_overrides  # no cycle: ranking imports none

        parse_overrides(value)
        return value


def parse_freshness_hours(text: str) -> dict[str, float]:
    """'26,wiki=6' as {'': 26.0, 'wiki': 6.0}; ValueError names the bad part."""
    windows: dict[str, float] = {"": 26.0}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, number = (x.strip() for x in part.rpartition("="))
        try:
            hours = float(number)
        except ValueError:
            hours = -1.0
        if (sep and not name) or not 0 < hours <= 24 * 365:
            raise ValueError(f"{part!r} is not hours (0 to 8760) or 'source=hours'")
        windows[name] = hours
    return windows


def parse_entity_weights(text: str) -> dict[str, float]:
    """'table=0.8,field=0.5' as {'table': 0.8, 'field': 0.5}; ValueError names the bad part."""
    weights: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, number = (x.strip() for x in part.partition("="))
        try:
            weight = float(number) if sep and name else -1.0
        except ValueError:
            weight = -1.0
        if not 0 <= weight <= 100:
            raise ValueError(f"{part!r} is not 'entity_type=weight' with a weight from 0 to 100")
        weights[name] = weight
    return weights


def load_settings(**overrides: object) -> Settings:
    """Read and validate the settings, failing fast with the names of the bad variables."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            name = "_".join(str(part) for part in error["loc"]) or "settings"
            # Fields read through an alias (IDEMPIERE_DB_*, ANTHROPIC_API_KEY) report it as is.
            variable = name if name.isupper() else f"RAG_{name.upper()}"
            problems.append(f"{variable}: {error['msg']}")
        raise ConfigError("invalid configuration: " + "; ".join(problems)) from None
