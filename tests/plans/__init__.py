"""Tests of persistent indexes and their cache (`tgm_xarray.plans`)."""
