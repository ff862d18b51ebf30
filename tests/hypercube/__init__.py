"""Tests of the planner (`tgm_xarray.hypercube`), one module per module of the package."""
