"""Tests of writing `.tgm` files: `writer.py`, `layout.py`, `blocks.py`, `pipeline.py`,
`atomic.py`, and the golden bytes they write."""
