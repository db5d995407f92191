"""Offline HTML: the Vega bundle (from vl-convert) and one self-contained report file."""

from __future__ import annotations

from functools import cache
from typing import Any

_GLOBALS = "window.vegaEmbed = vegaEmbed; window.vega = vega; window.vegaLite = vegaLite;"


@cache
def vega_bundle() -> str:
    """Vega, Vega-Lite and vega-embed in one script (vl-convert's bundle; BSD-3 licensed)."""
    import vl_convert as vlc

    from kvplan.report.charts import vega_lite_version

    return str(vlc.javascript_bundle(_GLOBALS, vl_version=vega_lite_version()))


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{ title }}</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; border-bottom: 1px solid #ccc; margin-top: 2em; }
table { border-collapse: collapse; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; }
th { font-weight: normal; color: #444; }
pre { background: #f6f6f6; padding: .5em .8em; white-space: pre-wrap; }
.chart { margin: 1em 0; } footer { color: #888; font-size: .85em; margin-top: 3em; }
</style>
<script>{{ bundle }}</script></head>
<body><h1>{{ title }}</h1><p>{{ subtitle }}</p>
{% for s in sections %}<section id="{{ s.id }}"><h2>{{ s.title }}</h2>
{% if s.lines %}<pre>{{ s.lines|join("\\n") }}</pre>{% endif %}
<table>{% for k, v in s.rows %}<tr><th>{{ k }}</th><td>{{ v }}</td></tr>{% endfor %}</table>
{% for c in s.charts %}<div class="chart" id="chart-{{ s.id }}-{{ loop.index0 }}"></div>{% endfor %}
</section>{% endfor %}
<footer>kvplan {{ version }} (vLLM {{ vllm }} arithmetic). Data, charts and scripts are inline:
this file opens offline. The answers as JSON are in the <code>kvplan-data</code> script.</footer>
<script type="application/json" id="kvplan-data">{{ data }}</script>
<script>
const DATA = JSON.parse(document.getElementById("kvplan-data").textContent);
const done = DATA.sections.flatMap((s) => s.charts.map((spec, i) =>
  vegaEmbed("#chart-" + s.id + "-" + i, spec, {actions: false, renderer: "svg"})));
Promise.all(done).then(() => { document.body.dataset.state = "done"; },
                       (e) => { document.body.dataset.state = "error"; console.error(e); });
</script></body></html>
"""


def render_report(title: str, subtitle: str, sections: list[Any]) -> str:
    """One self-contained HTML file: the Vega bundle, the answers' JSON and the charts inline."""
    import json
    from dataclasses import asdict

    import jinja2

    from kvplan import __version__
    from kvplan.report.json_views import vllm_version

    # every '<' as \u003c: in a <script> element '</' would close it early and '<!--<script>'
    # (a name, a hand-edited --plan) would make its own </script> not close it
    data = json.dumps({"title": title, "sections": [asdict(s) for s in sections]},
                      allow_nan=False).replace("<", "\\u003c")
    page = jinja2.Environment(autoescape=True).from_string(_PAGE)
    return page.render(title=title, subtitle=subtitle, sections=sections, data=_Raw(data),
                       bundle=_Raw(vega_bundle()), version=__version__, vllm=vllm_version())


class _Raw(str):
    """A string jinja must not escape (JSON and the script bundle, already safe for <script>)."""

    def __html__(self) -> str:
        return str(self)
