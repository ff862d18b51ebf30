"""Tests of the `tgm-xarray` command (`tgm_xarray.cli`)."""
