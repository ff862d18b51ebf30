"""Tests of virtual Zarr references (`tgm_xarray.virtual`, `tgm_xarray.frame_fetches`)."""
