"""``python -m tgm_xarray.cli``: the ``tgm-xarray`` command."""

import sys

from tgm_xarray.cli import main

if __name__ == "__main__":
    sys.exit(main())
