"""ecCodes' parameter database (2.50) for common ECMWF parameters, as cfgrib and MARS name them.

MARS's ``param`` is a shortName (``2t``) or a paramId (``167``, ``167.128``: table 128);
:func:`short_name` reads either. :data:`PARAMETERS` gives cfgrib's variable name (``cfVarName``)
and CF name, :data:`HEIGHTS` the height of the surface parameters ecCodes encodes at a height
above the ground.

>>> short_name("167.128"), PARAMETERS["2t"], height("10u"), height("lsm")
('2t', (167, 't2m', 'air_temperature'), 10.0, None)
"""

from __future__ import annotations

from typing import Any

#: shortName -> (paramId, cfVarName, cfName). cfgrib names variables by cfVarName (``2t`` is
#: ``t2m``); a parameter not listed has its shortName as cfVarName and cfName ``unknown``, as
#: in ecCodes.
PARAMETERS: dict[str, tuple[int, str, str]] = {
    "2t": (167, "t2m", "air_temperature"), "2d": (168, "d2m", "unknown"),
    "10u": (165, "u10", "eastward_wind"), "10v": (166, "v10", "northward_wind"),
    "100u": (228246, "u100", "eastward_wind"), "100v": (228247, "v100", "northward_wind"),
    "200u": (228239, "u200", "eastward_wind"), "200v": (228240, "v200", "northward_wind"),
    "10si": (207, "si10", "unknown"), "100si": (228249, "si100", "unknown"), "200si": (228241, "si200", "unknown"),
    "10fg": (49, "fg10", "unknown"), "10fg3": (228028, "fg10_3", "unknown"), "10fg6": (123, "fg10_6", "unknown"),
    "10wdir": (260260, "wdir10", "unknown"), "2r": (260242, "r2", "relative_humidity"),
    "2sh": (174096, "sh2", "specific_humidity"), "ci": (31, "siconc", "sea_ice_area_fraction"),
    "z": (129, "z", "geopotential"), "t": (130, "t", "air_temperature"), "u": (131, "u", "eastward_wind"),
    "v": (132, "v", "northward_wind"), "q": (133, "q", "specific_humidity"),
    "sp": (134, "sp", "surface_air_pressure"), "w": (135, "w", "lagrangian_tendency_of_air_pressure"),
    "vo": (138, "vo", "atmosphere_relative_vorticity"), "d": (155, "d", "divergence_of_wind"),
    "gh": (156, "gh", "geopotential_height"), "r": (157, "r", "relative_humidity"),
    "msl": (151, "msl", "air_pressure_at_mean_sea_level"), "tcc": (164, "tcc", "cloud_area_fraction"),
    "lsm": (172, "lsm", "land_binary_mask"), "stl1": (139, "stl1", "surface_temperature"),
    "sd": (141, "sd", "lwe_thickness_of_surface_snow_amount"), "orog": (228002, "orog", "geopotential_height"),
    "mx2t": (201, "mx2t", "air_temperature"), "mn2t": (202, "mn2t", "air_temperature"),
}
_SHORT_NAMES: dict[int, str] = {pid: short for short, (pid, _, _) in PARAMETERS.items()}

#: shortName -> height (m) of the MARS surface (``levtype=sfc``) parameters that ecCodes encodes
#: in GRIB2 at ``typeOfLevel=heightAboveGround``, ``level=<height>`` (``2t`` at 2 m), which
#: cfgrib gives as a ``heightAboveGround`` coordinate instead of ``surface``. ``10fg6`` is on
#: the surface in ecCodes 2.50.
HEIGHTS: dict[str, float] = {
    **dict.fromkeys(("2t", "2d", "2r", "2sh", "mx2t", "mn2t"), 2.0),
    **dict.fromkeys(("10u", "10v", "10si", "10fg", "10fg3", "10wdir"), 10.0),
    **dict.fromkeys(("100u", "100v", "100si"), 100.0),
    **dict.fromkeys(("200u", "200v", "200si"), 200.0),
}


def short_name(param: Any) -> str:
    """The shortName of a MARS ``param``: itself, or that of a listed paramId."""
    text = str(param)
    number = text.split(".", 1)[0]
    return _SHORT_NAMES.get(int(number), text) if number.isdigit() else text


def height(param: Any) -> float | None:
    """The height above the ground (m) of a MARS surface parameter, ``None`` for one on the
    surface (or not listed)."""
    return HEIGHTS.get(short_name(param))
