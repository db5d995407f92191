"""/docs: the API's reference, drawn on the server from its OpenAPI schema (/openapi.json).

FastAPI's own /docs (Swagger UI) and /redoc load their scripts, styles and fonts from
cdn.jsdelivr.net, fonts.googleapis.com and fastapi.tiangolo.com, so offline (the server's
normal place) they are a blank page; this one is plain HTML with nothing to fetch.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

router = APIRouter()

_STYLE = ("body{font:14px/1.45 system-ui,sans-serif;margin:1.5em auto;max-width:1100px}"
          "table{border-collapse:collapse}th,td{border:1px solid #ddd;padding:2px 8px;"
          "text-align:left}h2{font-size:1.05em;margin-top:1.6em}code{background:#f4f4f4}")


@router.get("/docs", response_class=HTMLResponse, include_in_schema=False)
def docs(request: Request) -> HTMLResponse:
    """Every endpoint: method, path, what it answers, its fields with type and default."""
    schema = request.app.openapi()
    parts = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>"
             f"{escape(schema['info']['title'])} API</title><style>{_STYLE}</style></head>"
             f"<body><h1>{escape(schema['info']['title'])} API "
             f"{escape(schema['info']['version'])}</h1>"
             f"<p>{escape(schema['info'].get('description', ''))} The schema: "
             "<a href=\"/openapi.json\"><code>/openapi.json</code></a>. Bad input answers 422 "
             "with <code>{\"detail\": ..., \"field\": ...}</code>.</p>"]
    for path, ops in schema["paths"].items():
        command = path.split("/")[2] if path.startswith("/api/") else ""
        helps = request.app.state.settings.field_help.get(command, {})
        for method, op in ops.items():
            parts.append(_operation(method, path, op, schema, helps))
    parts.append("</body></html>")
    return HTMLResponse("".join(parts))


def _operation(method: str, path: str, op: dict[str, Any], schema: dict[str, Any],
               helps: dict[str, str]) -> str:
    rows = [(p["name"], p["in"], p.get("required", False), p.get("schema", {}))
            for p in op.get("parameters", [])]
    body = op.get("requestBody", {}).get("content", {})
    for media, content in body.items():
        ref = content.get("schema", {})
        ref = _resolve(ref, schema)
        required = set(ref.get("required", ()))
        rows += [(name, f"body ({media})", name in required, prop)
                 for name, prop in ref.get("properties", {}).items()]
    table = "".join(f"<tr><td><code>{escape(name)}</code></td><td>{escape(where)}</td>"
                    f"<td>{escape(_type(s, schema))}</td><td>{'yes' if req else ''}</td>"
                    f"<td>{escape(_default(s))}</td><td>{escape(helps.get(name, ''))}</td></tr>"
                    for name, where, req, s in rows)
    head = ("<tr><th>field</th><th>in</th><th>type</th><th>required</th><th>default</th>"
            "<th>meaning and unit (the CLI's --help)</th></tr>")
    return (f"<h2 id=\"{escape(op.get('operationId', ''))}\"><code>{method.upper()} "
            f"{escape(path)}</code></h2><p>{escape(op.get('description', op.get('summary', '')))}"
            f"</p>" + (f"<table>{head}{table}</table>" if rows else ""))


def _resolve(s: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = s.get("$ref", "")
    if not ref.startswith("#/"):
        return s
    node: Any = schema
    for key in ref[2:].split("/"):
        node = node[key]
    return node  # type: ignore[no-any-return]


def _type(s: dict[str, Any], schema: dict[str, Any]) -> str:
    s = _resolve(s, schema)
    if "anyOf" in s:
        return " or ".join(_type(x, schema) for x in s["anyOf"])
    kind = str(s.get("type", "object"))
    if kind == "array":
        return f"array of {_type(s.get('items', {}), schema)}"
    return kind + (f" (format {s['format']})" if "format" in s else "")


def _default(s: dict[str, Any]) -> str:
    return json.dumps(s["default"]) if "default" in s else ""
