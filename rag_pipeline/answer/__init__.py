"""`rag ask`: answers from the index, with sources cited.

`ask.py` retrieves with `rag_pipeline.search` (its public API only, as any caller does),
`context.py` builds the prompt's context within a token budget, `llm.py` holds the LLM clients
(Anthropic, OpenAI-compatible) and `llm_stream.py` reads their streamed answers within bounds.
`rag_pipeline.search` never imports this package.
"""
