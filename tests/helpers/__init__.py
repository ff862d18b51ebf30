"""What the test modules share, other than fixtures (those are in the ``conftest.py`` files):
paths and the one rule for shared data (``shared``), child processes side by side (``children``), upstream's decodes as the oracle
(``oracle``), the codec matrix (``matrix``), random outer selections (``selections``), hostile
files, a range-capable HTTP server, archives of many messages, metadata tables for the planner,
upstream tensogram-xarray in a place of its own, pytest plugins for subprocesses (``plugins``),
and the helpers of one area each (``cli``, ``index``, ``hypercube``, ``zarr_codec``,
``virtual``, ``attrs``).

Test modules import from here, never from ``conftest`` or from one another. Nothing here imports
``benchmarks/``."""
