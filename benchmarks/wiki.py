"""The wiki source against a local MediaWiki API: full sync throughput and no-change sync cost.

    python benchmarks/wiki.py [--pages 2000] [--categories 4] [--latency 0.0] [--concurrency 4]

Starts the stand-in MediaWiki API of the tests (`rag_pipeline_tests/mediawiki_server.py`) with
`--pages` pages spread over `--categories` categories (one page in ten in two categories),
their HTML rendered from the migrated iDempiere pages in `../shared` (synthetic pages without
it), and prints:

- a full sync — every partition listed, every page fetched with `action=parse`: pages/s,
  requests;
- a no-change sync — every partition listed, nothing fetched (every revid is unchanged): the
  requests by kind, against the target of one listing per category and one `prop=revisions`
  request per 50 pages, and its time.

`--latency` adds that many seconds to every answer, as a remote wiki would; the fetch then
shows what `--concurrency` (requests in flight) buys.
"""

import argparse
import math
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rag_pipeline.core.source import DocumentRef, SourceDocument  # noqa: E402
from rag_pipeline.sources.wiki.client import MediaWikiClient  # noqa: E402
from rag_pipeline.sources.wiki.source import WikiConfig, WikiSource  # noqa: E402
from rag_pipeline_tests.mediawiki_server import (  # noqa: E402
    SHARED_WIKI_FIXTURES,
    FakeWiki,
    MediaWikiServer,
    rendered_html,
    shared_pages,
)


def build_wiki(pages: int, categories: int) -> FakeWiki:
    """`pages` pages over `categories` categories; every tenth page is in two."""
    if SHARED_WIKI_FIXTURES.is_dir():
        bodies = [rendered_html(p.markdown) for p in shared_pages()]
    else:
        bodies = [
            f'<div class="mw-parser-output"><h2><span class="mw-headline">Section {i}</span></h2>'
            f"<p>{'Synthetic benchmark paragraph. ' * 40}</p></div>"
            for i in range(20)
        ]
    wiki = FakeWiki()
    names = [f"Benchmark {c}" for c in range(categories)]
    for i in range(pages):
        in_categories = [names[i % categories]]
        if i % 10 == 0 and categories > 1:
            in_categories.append(names[(i + 1) % categories])
        wiki.add_page(f"Page {i:05d}", bodies[i % len(bodies)], in_categories, log=False)
    return wiki


def kinds(requests: list[dict[str, str]]) -> Counter[str]:
    """Requests by what they asked for."""
    return Counter(
        r.get("list") or r.get("prop") or r.get("meta") or r.get("action", "?") for r in requests
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--categories", type=int, default=4)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()

    wiki = build_wiki(args.pages, args.categories)
    with MediaWikiServer(wiki) as server:
        server.slow_seconds = args.latency
        config = WikiConfig(
            api_url=server.api_url,
            categories=tuple(f"Benchmark {c}" for c in range(args.categories)),
            category_depth=0,
            max_concurrency=args.concurrency,
        )
        client = MediaWikiClient(server.api_url, max_concurrency=args.concurrency)
        source = WikiSource(config, client=client)
        partitions = config.partition_keys()

        start = time.perf_counter()
        stored: dict[str, str] = {}
        fetched = 0
        for partition in partitions:
            refs = [r for r in source.list_documents(partition) if isinstance(r, DocumentRef)]
            # As the shared pipeline does: a page already stored at this revid is not fetched.
            changed = [r for r in refs if stored.get(r.key) != r.version]
            for document in source.fetch(changed):
                assert isinstance(document, SourceDocument), document
                stored[document.source_id + "@" + document.language] = document.version
                fetched += 1
        full_seconds = time.perf_counter() - start
        full_requests = kinds(server.requests)
        print(
            f"full sync: {len(stored)} pages in {len(partitions)} partitions, {fetched} fetched "
            f"in {full_seconds:.2f} s = {fetched / full_seconds:.0f} pages/s "
            f"(latency {args.latency * 1000:.0f} ms, concurrency {args.concurrency}); "
            f"requests {dict(full_requests)}"
        )

        server.reset_counts()
        start = time.perf_counter()
        sizes: list[int] = []
        for partition in partitions:
            refs = [r for r in source.list_documents(partition) if isinstance(r, DocumentRef)]
            sizes.append(len(refs))
            assert all(stored.get(r.key) == r.version for r in refs)
        quiet_seconds = time.perf_counter() - start
        quiet = kinds(server.requests)
        # Per partition: one listing per 500 members (cmlimit) and one revisions request per 50.
        listings = sum(math.ceil(n / 500) for n in sizes)
        revisions = sum(math.ceil(n / 50) for n in sizes)
        print(
            f"no-change sync: {sum(sizes)} listed pages ({len(stored)} distinct, partitions of "
            f"{sizes}) in {quiet_seconds:.3f} s, {sum(quiet.values())} requests {dict(quiet)}; "
            f"target {listings} listings + {revisions} revisions = {listings + revisions}; "
            f"{sum(sizes) / max(quiet['revisions'], 1):.1f} pages per revisions request"
        )
        source.close()
        client.close()


if __name__ == "__main__":
    main()
