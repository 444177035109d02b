"""The issue-14 hostile documents at full size, shared by the opt-in long tests and
benchmarks/hostile.py (no tests here)."""

FULL_SIZE = {
    "1 MB of #": "#" * 1_000_000,
    "500,000 empty headings": "#\n" * 500_000,
    "820 KB table": "| a | b | c |\n|---|---|---|\n" + "| x y z w | q r s | t u v |\n" * 30_000,
    "200,000 [": "[" * 200_000,
    "4.9 MB word": "x" * 4_900_000,
}
