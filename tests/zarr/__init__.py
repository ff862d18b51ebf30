"""Tests of the zarr v3 codec (`tgm_xarray.zarr_codec`)."""
