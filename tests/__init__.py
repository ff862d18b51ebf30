"""The test suite, a package so that its folders (which mirror ``src/tgm_xarray``) may hold
modules of the same name and import the shared helpers as ``tests.helpers``."""
