"""The HTTP/1.1 client of ``engine: vllm-server`` (standard library only).

- **Keep-alive**: idle connections are kept per (scheme, host, proxy) and reused; a reused
  connection that the server had closed meanwhile is replaced once, transparently.
- **Proxies from the environment**: ``HTTP_PROXY`` for ``http://`` URLs, ``HTTPS_PROXY`` for
  ``https://`` URLs (tunnelled with ``CONNECT``), ``NO_PROXY`` exceptions (read by
  :func:`urllib.request.getproxies_environment` and :func:`urllib.request.proxy_bypass_environment`,
  lower- or upper-case names); loopback hosts (``localhost``, ``127.0.0.0/8``, ``::1``) never
  go through a proxy, as in Go's ``net/http``. Only ``http://`` proxies are supported;
  credentials in the proxy URL become ``Proxy-Authorization: Basic``. TLS certificates are
  verified against the system store (``SSL_CERT_FILE``/``SSL_CERT_DIR`` are honoured).
- **A total deadline per request**: ``http.client``'s timeout bounds each receive, not the
  whole exchange (a server that drips one byte a second never times out); a watchdog thread
  shuts the socket down when the deadline passes.
- **A cap on every body**: a ``Content-Length`` over the cap is refused before reading, and
  a body (chunked or read to close) is read at most to the cap plus one byte.

Failures are :class:`TransportError` with ``kind`` ``"timeout"``, ``"connection"``,
``"too_large"`` or ``"protocol"``; the caller adds the server URL.
"""

from __future__ import annotations

import base64
import heapq
import http.client
import ipaddress
import itertools
import select
import socket
import ssl
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass

__all__ = ["Client", "Response", "TransportError", "proxy_for"]


class TransportError(Exception):
    """No usable response; ``kind``: ``timeout``, ``connection``, ``too_large``, ``protocol``."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]  # lower-case names
    body: bytes


class _Watchdog:
    """Shuts a connection's socket down once its deadline has passed (one thread for all)."""

    def __init__(self):
        self._cond = threading.Condition()
        self._heap: list[list] = []
        self._live = 0
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, conn, deadline: float) -> list:
        entry = [deadline, next(self._seq), conn, False]  # [.., conn or None, expired]
        with self._cond:
            heapq.heappush(self._heap, entry)
            self._live += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="qualgate-http-deadline", daemon=True)
                self._thread.start()
            self._cond.notify()
        return entry

    def disarm(self, entry: list) -> bool:
        """Stop watching; whether the deadline had already fired."""
        with self._cond:
            if entry[2] is not None:
                entry[2] = None
                self._live -= 1
                if len(self._heap) > 4 * self._live + 64:  # drop disarmed entries
                    self._heap = [e for e in self._heap if e[2] is not None]
                    heapq.heapify(self._heap)
            return entry[3]

    def _loop(self) -> None:
        with self._cond:
            while True:
                while self._heap and self._heap[0][2] is None:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                delay = self._heap[0][0] - time.monotonic()
                if delay > 0:
                    self._cond.wait(delay)
                    continue
                entry = heapq.heappop(self._heap)
                entry[3] = True
                sock = getattr(entry[2], "sock", None)
                if sock is None:  # still connecting (bounded by the socket timeout): look again
                    entry[0] += 0.05
                    heapq.heappush(self._heap, entry)
                    continue
                try:
                    sock.shutdown(socket.SHUT_RDWR)  # wakes a blocked recv/send
                except OSError:
                    pass


_WATCHDOG = _Watchdog()


def _loopback(host: str | None) -> bool:
    if not host:
        return False
    if host.lower() == "localhost" or host.lower().endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def proxy_for(url: str) -> urllib.parse.SplitResult | None:
    """The proxy the environment names for ``url`` (``None``: connect directly).

    Raises :class:`ValueError` for a proxy URL this client cannot use.
    """
    parts = urllib.parse.urlsplit(url)
    if _loopback(parts.hostname):
        return None
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(parts.scheme)
    if not proxy or urllib.request.proxy_bypass_environment(parts.netloc, proxies):
        return None
    if "://" not in proxy:
        proxy = "http://" + proxy
    p = urllib.parse.urlsplit(proxy)
    if p.scheme != "http" or not p.hostname:
        raise ValueError(f"{parts.scheme}_proxy={proxy!r}: only http:// proxies are supported")
    return p


class Client:
    """Keep-alive HTTP/1.1 requests to a few servers; thread-safe."""

    def __init__(self, headers: dict[str, str], *, pool_size: int = 16):
        self.headers = dict(headers)
        self.pool_size = pool_size
        self._idle: dict[tuple, list[http.client.HTTPConnection]] = {}
        self._lock = threading.Lock()
        self._ssl: ssl.SSLContext | None = None
        self._closed = False
        self.connections_opened = 0

    # -- connections -------------------------------------------------------------------

    def _route(self, base: str):
        parts = urllib.parse.urlsplit(base)
        proxy = proxy_for(base)
        return (parts.scheme, parts.netloc, proxy.netloc if proxy else None), parts, proxy

    def _connect(self, parts, proxy, timeout: float) -> http.client.HTTPConnection:
        if parts.scheme == "https":
            if self._ssl is None:
                self._ssl = ssl.create_default_context()
            if proxy is None:
                conn = http.client.HTTPSConnection(parts.netloc, timeout=timeout, context=self._ssl)
            else:
                conn = http.client.HTTPSConnection(proxy.hostname, proxy.port or 80, timeout=timeout, context=self._ssl)
                conn.set_tunnel(parts.hostname, parts.port or 443, headers=_proxy_auth(proxy))
        else:
            target = proxy if proxy is not None else parts
            conn = http.client.HTTPConnection(target.hostname, target.port or 80, timeout=timeout)
        with self._lock:
            self.connections_opened += 1
        return conn

    def _take(self, key):
        while True:
            with self._lock:
                idle = self._idle.get(key)
                conn = idle.pop() if idle else None
            if conn is None or _quiet(conn.sock):
                return conn
            conn.close()  # closed by the server, or bytes nobody asked for: never reuse

    def _give(self, key, conn) -> None:
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if not self._closed and len(idle) < self.pool_size:
                idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conns = [c for idle in self._idle.values() for c in idle]
            self._idle.clear()
        for c in conns:
            c.close()

    # -- requests ----------------------------------------------------------------------

    def request(
        self, method: str, base: str, path: str, body: bytes | None, *, timeout: float, max_bytes: int
    ) -> Response:
        """One exchange, done within ``timeout`` seconds (connect to last byte)."""
        deadline = time.monotonic() + timeout
        key, parts, proxy = self._route(base)
        headers = dict(self.headers)
        target = parts.path + path
        if proxy is not None and parts.scheme == "http":
            target = f"http://{parts.netloc}{target}"  # absolute form, to the proxy
            headers.update(_proxy_auth(proxy) or {})
        while True:
            conn = self._take(key)
            reused = conn is not None
            left = deadline - time.monotonic()
            if left <= 0:
                if conn is not None:
                    conn.close()
                raise TransportError("timeout", f"no complete response within {timeout:g} s")
            if conn is None:
                conn = self._connect(parts, proxy, left)
            else:
                conn.timeout = left
                if conn.sock is not None:
                    conn.sock.settimeout(left)
            entry = _WATCHDOG.arm(conn, deadline)
            responded = False
            try:
                conn.request(method, target, body=body, headers=headers)
                resp = conn.getresponse()
                responded = True
                if resp.length is not None and resp.length > max_bytes:
                    raise TransportError(
                        "too_large",
                        f"response of {resp.length} bytes (over "
                        f"the limit of {max_bytes}; engine_options."
                        "max_response_bytes)",
                    )
                data = _read_capped(resp, max_bytes)
            except TransportError:
                _WATCHDOG.disarm(entry)
                conn.close()
                raise
            except (OSError, http.client.HTTPException, ValueError) as exc:
                expired = _WATCHDOG.disarm(entry)
                conn.close()
                if expired or isinstance(exc, TimeoutError) or time.monotonic() >= deadline:
                    raise TransportError("timeout", f"no complete response within {timeout:g} s") from None
                if (
                    reused
                    and not responded
                    and isinstance(exc, (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError))
                ):
                    continue  # the server had closed this idle connection: use a new one
                kind = (
                    "protocol"
                    if isinstance(exc, (http.client.HTTPException, ValueError))
                    and not isinstance(exc, (http.client.RemoteDisconnected, http.client.IncompleteRead))
                    else "connection"
                )
                raise TransportError(kind, f"{type(exc).__name__}: {exc}") from None
            if _WATCHDOG.disarm(entry):
                conn.close()
                raise TransportError("timeout", f"no complete response within {timeout:g} s")
            if resp.will_close:
                conn.close()
            else:
                self._give(key, conn)
            return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)


def _proxy_auth(proxy) -> dict[str, str] | None:
    if proxy.username is None:
        return None
    user = urllib.parse.unquote(proxy.username)
    pw = urllib.parse.unquote(proxy.password or "")
    token = base64.b64encode(f"{user}:{pw}".encode()).decode()
    return {"Proxy-Authorization": f"Basic {token}"}


def _read_capped(resp: http.client.HTTPResponse, max_bytes: int) -> bytes:
    chunks, n = [], 0
    while True:
        chunk = resp.read(min(1 << 16, max_bytes + 1 - n))
        if not chunk:
            if resp.length:  # http.client counts down a Content-Length as it reads
                raise http.client.IncompleteRead(b"".join(chunks), resp.length)
            return b"".join(chunks)
        n += len(chunk)
        if n > max_bytes:
            raise TransportError(
                "too_large", f"response body over the limit of {max_bytes} bytes (engine_options.max_response_bytes)"
            )
        chunks.append(chunk)


def _quiet(sock) -> bool:
    """Whether an idle connection has nothing to read (neither data nor end of stream)."""
    if sock is None:
        return False
    try:
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return not poller.poll(0)
    except (OSError, ValueError):
        return False
