"""Sources: where documents come from, each yielding `SourceDocument`-shaped stage records."""
