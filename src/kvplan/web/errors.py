"""Bad input -> HTTP 422 with one line and the form field it belongs to; load -> 503/429 with
Retry-After; never a 500."""

from __future__ import annotations

import re
from typing import Any

FLAG = re.compile(r"--([a-z][a-z0-9-]+)")


def field_of(message: str, fields: tuple[str, ...] = ()) -> str | None:
    """The form field a message is about: its first ``--vllm-flag``, or a field it names."""
    low = message.lower()
    for key in ("model", "gpu", "dataset"):
        if low.startswith((f"unknown {key}", f"{key} ")):
            return key
    m = FLAG.search(message)
    if m:
        return m.group(1).replace("-", "_")
    return next((f for f in fields if f in low), None)


def one_line(message: str) -> str:
    return " ".join(str(message).split())


def error_body(message: str, field: str | None) -> dict[str, Any]:
    """The 422 body: ``detail`` (one line, like the CLI's ``error:`` line) and ``field``."""
    return {"detail": one_line(message), "field": field}


def validation_message(errors: list[Any]) -> tuple[str, str | None]:
    """FastAPI's validation error list -> one line naming the vLLM flag, and the field."""
    first = errors[0]
    loc = [str(p) for p in first.get("loc", ()) if p not in ("query", "body", "path")]
    if first.get("loc", ())[:1] == ("body",) and (first.get("type") == "json_invalid"
                                                  or len(first.get("loc", ())) == 1):
        return _body_message(first), None  # the body itself, not a field (loc: a position)
    field = loc[0] if loc else None
    if field == "file":  # /api/upload: a multipart part, not a flag
        return ("upload a config.json as the multipart form field 'file' (curl -F "
                "file=@config.json)", "config")
    flag = "--" + field.replace("_", "-") if field else "request"
    msg = str(first.get("msg", "invalid value"))
    given = first.get("input")
    tail = f", got {given!r}" if given is not None and not isinstance(given, dict) else ""
    return f"{flag}: {msg}{tail}", field


def _body_message(error: Any) -> str:
    """A POST body that is no JSON object: say so, and what to send."""
    want = "send one JSON object of the form's fields ({\"model\": ..., ...})"
    if error.get("type") == "json_invalid":
        why = (error.get("ctx") or {}).get("error", "JSON decode error")
        return f"request body is not valid JSON ({why}, at character {error['loc'][-1]}): {want}"
    what = "empty" if error.get("type") == "missing" else "not a JSON object"
    return f"request body is {what}: {want}"


def install(app: Any) -> None:
    """Register the handlers: KvplanError/ValueError and validation errors -> 422, Busy ->
    its status (503 or 429) with a Retry-After header."""
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse

    from kvplan.errors import KvplanError
    from kvplan.web.gate import Busy

    async def user_error(_request: Any, exc: Exception) -> JSONResponse:
        return JSONResponse(error_body(str(exc), field_of(str(exc))), status_code=422)

    async def invalid(_request: Any, exc: RequestValidationError) -> JSONResponse:
        message, field = validation_message(list(exc.errors()))
        return JSONResponse(error_body(message, field), status_code=422)

    async def busy(_request: Any, exc: Busy) -> JSONResponse:
        body = {**error_body(str(exc), None), **({"job": exc.job} if exc.job else {})}
        return JSONResponse(body, status_code=exc.status,
                            headers={"retry-after": str(exc.retry_after_s)})

    app.add_exception_handler(Busy, busy)
    app.add_exception_handler(KvplanError, user_error)
    app.add_exception_handler(ValueError, user_error)
    app.add_exception_handler(RequestValidationError, invalid)
