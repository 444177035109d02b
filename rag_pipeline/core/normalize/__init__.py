"""Every source format to one canonical CommonMark/GFM style (seed ADR-040)."""
