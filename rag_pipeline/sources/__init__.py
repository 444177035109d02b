"""Source plug-ins: one module or package per source, each implementing `core.source.Source`."""
