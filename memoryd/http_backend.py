"""HTTP plumbing shared by the backends memoryd calls over the network (embedders, LLMs).

URL checks, endpoints, what counts as a transient failure, the backoff, the server's
``Retry-After`` hint, and error texts fit for logs: they name the server, never a key or
the userinfo of a URL.
"""

from __future__ import annotations

import email.utils
import math
import random
import time
from pathlib import Path
from typing import Any, ClassVar, TypedDict, Unpack

import httpx
import msgspec
import trio

from memoryd.config import ModelServerConfig
from memoryd.errors import ConfigError

#: Statuses worth another try: request timeout, rate limit, and the server's own errors.
RETRY_STATUS = frozenset({408, 429}) | frozenset(range(500, 600))
#: A Retry-After past this is taken as this: a confused proxy must not stall work for a day.
MAX_RETRY_AFTER = 3600.0
_ERROR_DETAIL_CHARS = 200


class Retryable(Exception):
    """One attempt failed in a way worth retrying; ``retry_after`` is the server's hint (s)."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


def checked_url(url: str) -> None:
    """Raises ValueError unless ``url`` looks like http(s)://host[:port][/path]."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        raise ValueError("url is not a valid URL") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ValueError(f"url must look like http://host:port, got {without_secrets(url)!r}")


def endpoint(url: str, path: str) -> str:
    base = url.rstrip("/")
    # Accept "http://host/v1" for OpenAI-style servers as well as "http://host".
    if path.startswith("/v1/") and base.endswith("/v1"):
        base = base[: -len("/v1")]
    return base + path


def without_secrets(url: str) -> str:
    """The URL without user:password and query string, fit for logs and health output."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        return "<invalid url>"
    port = f":{parsed.port}" if parsed.port else ""
    return f"{parsed.scheme}://{parsed.host}{port}{parsed.path}"


def error_detail(body: bytes) -> str:
    """A short error message from a JSON error body (Ollama: {"error": str}; OpenAI: {"error": {"message"}})."""
    try:
        data = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return ""
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        error = error.get("message")
    return error[:_ERROR_DETAIL_CHARS] if isinstance(error, str) else ""


def retry_after(response: httpx.Response, *, now: float | None = None) -> float | None:
    """The ``Retry-After`` header in seconds (delta-seconds or an HTTP date), capped at
    :data:`MAX_RETRY_AFTER`; None when absent or unreadable (the caller's own backoff applies)."""
    value = response.headers.get("Retry-After", "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            return None  # RFC 9110 dates are GMT; one without a zone is not one
        seconds = when.timestamp() - (time.time() if now is None else now)
    if math.isnan(seconds):
        return None
    return min(MAX_RETRY_AFTER, max(0.0, seconds))


def backoff_delay(attempt: int, *, base: float, cap: float, hint: float | None = None) -> float:
    """Seconds to wait before retry number ``attempt + 1``: exponential with jitter, at least
    the server's hint, never past ``cap``."""
    delay = min(cap, base * 2.0**attempt) * random.uniform(0.5, 1.0)
    if hint is not None:
        delay = min(cap, max(delay, hint))
    return delay


def status_reason(response: httpx.Response) -> str:
    """ "HTTP 503: overloaded" (the server's own message when it sent one)."""
    reason = f"HTTP {response.status_code}"
    detail = error_detail(response.content)
    return f"{reason}: {detail}" if detail else reason


def server_api_key(section: str, chooser: str, settings: ModelServerConfig) -> str | None:
    """The API key of ``[section]`` (None: none is set), once ``chooser`` picked an HTTP backend.

    Checks the section first: ConfigError names the key when url or model is missing, both key
    settings are set, or the key file is unreadable or empty (never its contents)."""
    for key in ("url", "model"):
        if not getattr(settings, key):
            raise ConfigError(f"{section}.{key} is required for {chooser}")
    api_key, api_key_file = settings.api_key, settings.api_key_file
    if api_key and api_key_file:
        raise ConfigError(f"{section}.api_key and {section}.api_key_file are both set; keep one")
    if api_key_file:
        path = Path(api_key_file).expanduser()
        try:
            key = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(f"{section}.api_key_file: cannot read {path}: {exc.strerror}") from None
        if not key:
            raise ConfigError(f"{section}.api_key_file: {path} is empty")
        return key
    return api_key or None


class Refused(Exception):
    """The server answered, and not with success or a status worth retrying (``status`` is
    None when httpx refused the request before sending it)."""

    def __init__(self, status: int | None, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class JsonEndpoint:
    """One JSON POST endpoint of a backend: its httpx client, a deadline on the whole attempt,
    and failures sorted into :class:`Retryable` and :class:`Refused`.  Reasons never hold the key."""

    def __init__(self, url: str, path: str, *, label: str, api_key: str | None, timeout: float) -> None:
        checked_url(url)
        self.url = endpoint(url, path)
        self.shown_url = without_secrets(self.url)
        #: "ollama at http://127.0.0.1:11434/api/embed": how errors and logs name the server.
        self.where = f"{label} at {self.shown_url}"
        self._api_key = api_key or None
        self.timeout = timeout
        self._client: httpx.AsyncClient | None = None

    async def start(self) -> None:
        # No request here: a backend that is down at start-up must not stop the daemon.
        if self._client is None:
            headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(self.timeout), headers=headers)

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def post(self, payload: bytes) -> bytes:
        """One attempt; the body of a 2xx reply."""
        await self.start()
        assert self._client is not None
        # httpx's timeout bounds each phase; this bounds the whole attempt (a server
        # trickling bytes forever would otherwise never time out).
        with trio.move_on_after(self.timeout) as deadline:
            try:
                response = await self._client.post(
                    self.url, content=payload, headers={"Content-Type": "application/json"}
                )
            except httpx.TimeoutException:
                raise Retryable(f"no reply within {self.timeout:g} s") from None
            except (httpx.NetworkError, httpx.RemoteProtocolError) as exc:
                raise Retryable(f"connection failed ({type(exc).__name__}: {self.redact(str(exc))})") from None
            except httpx.HTTPError as exc:
                raise Refused(None, self.redact(str(exc))) from None
        if deadline.cancelled_caught:
            raise Retryable(f"no reply within {self.timeout:g} s")
        if response.status_code in RETRY_STATUS:
            raise Retryable(self.redact(status_reason(response)), retry_after(response))
        if response.status_code >= 300:
            raise Refused(response.status_code, self.redact(status_reason(response)))
        return response.content

    def redact(self, text: str) -> str:
        return text.replace(self._api_key, "***") if self._api_key else text


class ServerOptions(TypedDict, total=False):
    """The keyword options every HTTP model backend takes, embedder or LLM."""

    #: Sent as a Bearer token (never logged).
    api_key: str | None
    #: Seconds one request may take, reply included.
    timeout: float
    retries: int
    backoff: float
    max_backoff: float


class HttpBackend:
    """What a backend over one :class:`JsonEndpoint` shares: opening and closing it, and the
    state ``system.health`` shows (idle, ok, error, closed, with the last error's text)."""

    #: What an option the caller leaves out defaults to (an LLM's reply takes longer than a vector).
    default_timeout: ClassVar[float] = 10.0
    default_retries: ClassVar[int] = 3

    def __init__(self, url: str, path: str, *, label: str, model: str, **options: Unpack[ServerOptions]) -> None:
        timeout = options.get("timeout", self.default_timeout)
        retries = options.get("retries", self.default_retries)
        if not model:
            raise ValueError("model is required")
        if retries < 0 or timeout <= 0:
            raise ValueError("retries must be >= 0, timeout > 0")
        self._http = JsonEndpoint(url, path, label=label, api_key=options.get("api_key"), timeout=timeout)
        self.model = model
        #: Tries after the first; the waits between them grow from ``backoff`` up to ``max_backoff`` s.
        self._retries = retries
        self._backoff = options.get("backoff", 0.5)
        self._max_backoff = options.get("max_backoff", 8.0)
        self._state = "idle"
        self._last_error: str | None = None

    async def start(self) -> None:
        await self._http.start()

    async def aclose(self) -> None:
        await self._http.aclose()
        self._state = "closed"

    def longest_call(self) -> float:
        """Seconds one call may take at most: every attempt's timeout and the longest waits
        between them (a wait for a free slot not counted)."""
        return (self._retries + 1) * self._http.timeout + self._retries * self._max_backoff

    def connection_status(self) -> dict[str, Any]:
        """The part of ``system.health``'s view of a backend that every backend has."""
        return {"state": self._state, "last_error": self._last_error, "url": self._http.shown_url}

    def _succeeded(self) -> None:
        self._state, self._last_error = "ok", None

    def _failed(self, error: Exception) -> None:
        self._state, self._last_error = "error", str(error)
