"""Offline HTML: the Vega bundle (from vl-convert) and one self-contained report file."""

from __future__ import annotations

from functools import cache

_GLOBALS = "window.vegaEmbed = vegaEmbed; window.vega = vega; window.vegaLite = vegaLite;"


@cache
def vega_bundle() -> str:
    """Vega, Vega-Lite and vega-embed in one script (vl-convert's bundle; BSD-3 licensed)."""
    import vl_convert as vlc

    from kvplan.report.charts import vega_lite_version

    return str(vlc.javascript_bundle(_GLOBALS, vl_version=vega_lite_version()))
