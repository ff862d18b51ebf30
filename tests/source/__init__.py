"""Tests of where an open's bytes come from (`tgm_xarray.source`): local files, handles, remote
URLs, other inputs."""
