"""Exports of the results view: each picture as PNG or SVG, its data as CSV.

Streamlit draws Altair charts with vega-embed's own menu turned off, so the files are made on the
server: vl-convert renders the same Vega-Lite spec the page shows (no browser, no network), only
when the button is clicked (a callable ``data``).
"""
from __future__ import annotations

import re

import pandas as pd
import streamlit as st


def chart_png(chart) -> bytes:
    import vl_convert as vlc
    return vlc.vegalite_to_png(chart.to_json(), scale=2)


def chart_svg(chart) -> str:
    import vl_convert as vlc
    return vlc.vegalite_to_svg(chart.to_json())


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "result"


def export_buttons(name: str, chart=None, data: pd.DataFrame | None = None, key: str = "") -> None:
    """PNG, SVG (of ``chart``) and CSV (of ``data``) download buttons in one row."""
    slug, key = _slug(name), key or _slug(name)
    cols = st.columns([1, 1, 1, 6])
    if chart is not None:
        cols[0].download_button("PNG", lambda: chart_png(chart), file_name=f"{slug}.png",
                                mime="image/png", key=f"png-{key}", on_click="ignore")
        cols[1].download_button("SVG", lambda: chart_svg(chart), file_name=f"{slug}.svg",
                                mime="image/svg+xml", key=f"svg-{key}", on_click="ignore")
    if data is not None:
        cols[2].download_button("CSV", lambda: data.to_csv(index=False), file_name=f"{slug}.csv",
                                mime="text/csv", key=f"csv-{key}", on_click="ignore")
