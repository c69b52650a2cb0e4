"""Helpers of scripts/detection-bench.py (SPEC §16.5, issue 23 item 3)."""
