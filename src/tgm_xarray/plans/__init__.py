"""A source's plans, cached and run: above the planner (:mod:`tgm_xarray.hypercube`), which makes
them, and the byte layer (:mod:`tgm_xarray.source`), which they are made from.

- :mod:`.planning`: ``planned``, a source's plans, through its sidecar index where there is a
  fresh one (then the data file is neither scanned nor opened), else from its table (and the
  index written);
- :mod:`.index`: the sidecar index, a signed table and plans (docs/archives.md, "The index").
"""

from tgm_xarray.plans.planning import Planned, dimension_coords, planned

__all__ = ["Planned", "dimension_coords", "planned"]
