"""`rag mcp`: the knowledge tools served to agents over the Model Context Protocol.

`server.py` declares the tools and runs the server (stdio, or HTTP with `--http PORT`),
`tools.py` computes what each tool returns, `http.py` guards HTTP with a bearer token,
`sessions.py` caps and evicts sessions, `asgi.py` holds the ASGI plumbing they share. Search
goes through `rag_pipeline.search`'s public API only; `rag_pipeline.search` never imports this
package.
"""
