"""What the test modules share, other than fixtures (those are in the ``conftest.py`` files):
paths and the shared-data rule (``shared``), upstream's decodes as the oracle (``oracle``), the
codec matrix (``matrix``), random outer selections (``selections``), hostile files, a
range-capable HTTP server, archives of many messages, and helpers of one area each.

Test modules import from here, never from ``conftest`` or from one another. Nothing here imports
``benchmarks/``."""
