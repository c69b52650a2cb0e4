"""Helpers of scripts/detection-bench.py ([§16.5](docs/curated-packs.md#s16-5), issue 23 item 3)."""
