"""Every failure of the thread API is one JSON body, ``{"error": {"code", "message"}}``, with
a 4xx status saying whose fault it was; what the store and the agent raise is mapped here,
once, so each route only raises."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException

from roboz.agent import AgentConfigurationError, ClientToolError
from roboz.threads import (
    ContinuationTokenError,
    MessageGeneratingError,
    MessageNotFoundError,
    ThreadBusyError,
    ThreadNotFoundError,
    ThreadPermissionError,
    ThreadReadOnlyError,
    UnencodableTextError,
)


class ErrorDetail(BaseModel):
    code: str
    """A stable name for the kind of failure, e.g. ``thread_not_found``, ``thread_read_only``."""
    message: str
    """One line saying what was wrong."""


class ErrorBody(BaseModel):
    """What every 4xx and 5xx response of the thread API carries."""

    error: ErrorDetail


class ApiError(Exception):
    """A failure a route names itself: its status, code and message."""

    def __init__(
        self, status: int, code: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}


_MAPPED: tuple[tuple[type[Exception], int, str], ...] = (
    (ThreadNotFoundError, 404, "thread_not_found"),
    (MessageNotFoundError, 404, "message_not_found"),
    (ThreadPermissionError, 403, "forbidden"),
    # The seed's name for it: RobotoThreadReadOnlyException.
    (ThreadReadOnlyError, 409, "thread_read_only"),
    (ThreadBusyError, 409, "thread_busy"),
    (MessageGeneratingError, 409, "message_generating"),
    (ClientToolError, 409, "client_tool_turn"),
    (ContinuationTokenError, 400, "bad_continuation_token"),
    (UnencodableTextError, 400, "unencodable_text"),
    (AgentConfigurationError, 400, "invalid_request"),
)


def error_response(status: int, code: str, message: str, **headers: str) -> JSONResponse:
    body = {"error": {"code": code, "message": " ".join(message.split())}}
    return JSONResponse(body, status_code=status, headers=headers or None)


def mapped(error: Exception) -> tuple[int, str] | None:
    """The status and code of an error the store or the agent raised, if it is one."""
    for kind, status, code in _MAPPED:
        if isinstance(error, kind):
            return status, code
    return None


def _validation_message(error: RequestValidationError) -> tuple[int, str, str]:
    problems: list[str] = []
    for item in error.errors()[:5]:
        if item.get("type") == "json_invalid":
            return 400, "malformed_json", f"the body is not valid JSON: {item.get('msg', '')}"
        where = ".".join(str(part) for part in item.get("loc", ()) if part != "body")
        problems.append(f"{where or 'body'}: {item.get('msg', 'invalid')}")
    return 422, "invalid_request", "; ".join(problems) or "the request is invalid"


def install_error_handlers(app: FastAPI) -> None:
    async def api_error(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, ApiError)
        return error_response(error.status, error.code, error.message, **error.headers)

    async def validation(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, RequestValidationError)
        return error_response(*_validation_message(error))

    async def http(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, HTTPException)
        code = {404: "not_found", 405: "method_not_allowed", 401: "unauthorized"}.get(
            error.status_code, "http_error"
        )
        headers: dict[str, Any] = dict(error.headers or {})
        return error_response(error.status_code, code, str(error.detail), **headers)

    async def known(request: Request, error: Exception) -> JSONResponse:
        status, code = mapped(error) or (500, "internal_error")
        return error_response(status, code, str(error))

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(RequestValidationError, validation)
    app.add_exception_handler(HTTPException, http)
    for kind, _, _ in _MAPPED:
        app.add_exception_handler(kind, known)
