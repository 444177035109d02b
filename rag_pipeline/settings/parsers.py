"""Parsers of the settings written as small lists: freshness windows and entity weights.

Each returns the parsed value or raises a `ValueError` naming the bad part; the validators of
`rag_pipeline.settings.Settings` call them so a bad value fails at load, and the code reading
the setting calls them again for the value.
"""


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
