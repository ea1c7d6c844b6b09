"""HTTP plumbing shared by the sync and async clients: URLs, auth, retries, error mapping.

Retries, with exponential backoff (``backoff * 2**attempt``, capped at ``max_backoff``):

- a connection that could not be made (refused, DNS, connect timeout): every method,
  since the server never saw the request;
- a read that failed after sending (timeout, reset): GET, PUT and DELETE, which are
  idempotent, and a POST the server deduplicates (a usage record or a messages append
  with the call's ``message_id``); any other POST is not repeated because the server
  may have done it;
- 503 answers: every method (the server answers 503 only when it changed nothing);
- 502 and 504 answers, which a proxy gives when the server failed or was slow, perhaps
  after doing the work: the same requests as a failed read;
- 429 when ``retry_on_rate_limit`` is on, waiting ``Retry-After`` seconds when the
  answer says so (at most ``max_retry_after``);
- 409 ``idempotency_key_in_use``: the same write, sent before with the same
  ``Idempotency-Key``, is still running on the server; the retry gets its answer.

Every write the clients send carries an ``Idempotency-Key`` (one per call, the same on
each retry; see ``Api._idempotency_headers``), which the server applies once however
often it arrives: so every write is repeatable, like GET, PUT and DELETE.

When the retries run out the last error is raised: :class:`ConnectionFailed` for the
transport errors, the mapped :class:`ContextopsError` for the statuses.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from ._version import __version__
from .errors import ConnectionFailed, ContextopsError, error_from_response

API_PREFIX = "/api/v1"
DEFAULT_TIMEOUT = 30.0
# A proxy's answers when the server failed or was too slow: it may have done the work.
GATEWAY_STATUSES = frozenset({502, 504})
IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
USER_AGENT = f"contextops-client/{__version__}"


@dataclass(frozen=True)
class RetryPolicy:
    retries: int = 3
    backoff: float = 0.5
    max_backoff: float = 8.0
    retry_on_rate_limit: bool = True
    max_retry_after: float = 60.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retry number ``attempt + 1``: doubling, with a little jitter."""
        base = min(self.max_backoff, self.backoff * (2.0**attempt))
        return base * (0.9 + 0.2 * random.random())

    def retry_after(self, response: httpx.Response, attempt: int) -> float:
        header = response.headers.get("Retry-After", "")
        try:
            seconds = float(header)
        except ValueError:
            return self.delay(attempt)
        return max(0.0, min(seconds, self.max_retry_after))


def split_base_url(url: str | None) -> str:
    """The site root of ``url``: ``http://host:8000/api/v1/`` and ``http://host:8000`` give
    ``http://host:8000``, so dashboard addresses can be built from it too."""
    url = (url or os.environ.get("CONTEXTOPS_URL") or "http://127.0.0.1:8000").strip()
    if "://" not in url:
        url = "http://" + url
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    if path.endswith(API_PREFIX):
        path = path[: -len(API_PREFIX)]
    return urlunsplit((parts.scheme, parts.netloc, path, "", "")).rstrip("/")


def _decode(response: httpx.Response) -> Any:
    if response.status_code == 204 or not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return response.text


def _error_code(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return ""
    return str(body.get("error", "")) if isinstance(body, dict) else ""


def raise_for_error(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        body = response.json()
    except ValueError:
        body = None
    raise error_from_response(response.status_code, body, response.text)


class _Base:
    def __init__(
        self,
        base_url: str | None,
        api_key: str | None,
        retry: RetryPolicy,
    ) -> None:
        self.base_url = split_base_url(base_url)
        self.api_url = self.base_url + API_PREFIX
        self.api_key = api_key if api_key is not None else os.environ.get("CONTEXTOPS_API_KEY", "")
        self.retry = retry

    def headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def url(self, path: str) -> str:
        return self.api_url + (path if path.startswith("/") else "/" + path)

    def _wait_for(
        self, method: str, outcome: Any, attempt: int, idempotent: bool = False
    ) -> float | None:
        """Seconds to wait before retrying after ``outcome`` (a response or a transport
        error), or None when it must not be retried. ``idempotent`` marks a POST that the
        server applies once however often it arrives."""
        if attempt >= self.retry.retries:
            return None
        repeatable = idempotent or method in IDEMPOTENT
        if isinstance(outcome, httpx.Response):
            if outcome.status_code == 503 or (
                outcome.status_code in GATEWAY_STATUSES and repeatable
            ):
                return self.retry.delay(attempt)
            if outcome.status_code == 429 and self.retry.retry_on_rate_limit:
                return self.retry.retry_after(outcome, attempt)
            if outcome.status_code == 409 and _error_code(outcome) == "idempotency_key_in_use":
                return self.retry.retry_after(outcome, attempt)
            return None
        if isinstance(outcome, httpx.ConnectError | httpx.ConnectTimeout):
            return self.retry.delay(attempt)
        if isinstance(outcome, httpx.TransportError) and repeatable:
            return self.retry.delay(attempt)
        return None

    def _finish(self, outcome: Any, method: str, path: str) -> Any:
        if isinstance(outcome, httpx.Response):
            raise_for_error(outcome)
            return _decode(outcome)
        raise ConnectionFailed(
            f"{method} {self.url(path)} failed: {type(outcome).__name__}: {outcome}"
        ) from outcome


def _params(params: dict[str, Any] | None) -> dict[str, Any] | None:
    if not params:
        return None
    out: dict[str, Any] = {}
    for key, value in params.items():
        if value is None:
            continue
        out[key] = ("true" if value else "false") if isinstance(value, bool) else value
    return out


class SyncTransport(_Base):
    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        http_client: httpx.Client | None = None,
    ) -> None:
        super().__init__(base_url, api_key, retry or RetryPolicy())
        self._owns_client = http_client is None
        self.http = http_client or httpx.Client(timeout=timeout)

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        timeout: float | None = None,
        idempotent: bool = False,
        headers: dict[str, str] | None = None,
    ) -> Any:
        method = method.upper()
        sent_headers = {**self.headers(), **(headers or {})}
        extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        attempt = 0
        while True:
            try:
                outcome: Any = self.http.request(
                    method,
                    self.url(path),
                    json=json,
                    params=_params(params),
                    headers=sent_headers,
                    **extra,
                )
            except httpx.TransportError as exc:
                outcome = exc
            wait = self._wait_for(method, outcome, attempt, idempotent)
            if wait is None:
                return self._finish(outcome, method, path)
            attempt += 1
            time.sleep(wait)

    def close(self) -> None:
        if self._owns_client:
            self.http.close()


class AsyncTransport(_Base):
    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        super().__init__(base_url, api_key, retry or RetryPolicy())
        self._owns_client = http_client is None
        self.http = http_client or httpx.AsyncClient(timeout=timeout)

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        timeout: float | None = None,
        idempotent: bool = False,
        headers: dict[str, str] | None = None,
    ) -> Any:
        method = method.upper()
        sent_headers = {**self.headers(), **(headers or {})}
        extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        attempt = 0
        while True:
            try:
                outcome: Any = await self.http.request(
                    method,
                    self.url(path),
                    json=json,
                    params=_params(params),
                    headers=sent_headers,
                    **extra,
                )
            except httpx.TransportError as exc:
                outcome = exc
            wait = self._wait_for(method, outcome, attempt, idempotent)
            if wait is None:
                return self._finish(outcome, method, path)
            attempt += 1
            await asyncio.sleep(wait)

    async def aclose(self) -> None:
        if self._owns_client:
            await self.http.aclose()


__all__ = ["AsyncTransport", "ContextopsError", "RetryPolicy", "SyncTransport"]
