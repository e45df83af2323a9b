"""The vllm-server client's transport: proxies from the environment (a real forward proxy on
127.0.0.1 that forwards absolute-form requests and tunnels ``CONNECT``), HTTPS verified
against ``SSL_CERT_FILE``, and the total deadline.

The TLS material in ``tls/`` is test-only (``tls/make.sh`` made it): a CA and a
certificate for the host name ``vllm.test``, which the proxy maps to a loopback server.
"""

from __future__ import annotations

import http.client
import socket
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from backends.test_vllm_server import server_config, some_requests

from qualgate.backends import open_backend
from qualgate.backends._http import Client, TransportError, proxy_for
from qualgate.errors import DataError

TLS = Path(__file__).parent / "tls"
PROXY_VARS = (
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "all_proxy",
    "ALL_PROXY",
)


@pytest.fixture(autouse=True)
def no_proxy_env(monkeypatch):
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)


class ForwardProxy:
    """An HTTP proxy on 127.0.0.1: ``routes`` maps ``host:port`` to a loopback address.

    ``seen`` records (method, target, Proxy-Authorization) of every request it was asked.
    """

    def __init__(self, routes: dict[str, tuple[str, int]]):
        self.routes = routes
        self.seen: list[tuple[str, str, str | None]] = []
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def _handler(self):
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _record(self):
                proxy.seen.append((self.command, self.path, self.headers.get("Proxy-Authorization")))

            def do_CONNECT(self):
                self._record()
                upstream = socket.create_connection(proxy.routes[self.path], timeout=5)
                self.send_response(200, "Connection established")
                self.end_headers()
                self.wfile.flush()
                self.close_connection = True

                def pump(src, dst):
                    try:
                        while data := src.recv(65536):
                            dst.sendall(data)
                    except OSError:
                        pass
                    finally:
                        for s in (src, dst):
                            try:
                                s.shutdown(socket.SHUT_RDWR)
                            except OSError:
                                pass

                back = threading.Thread(target=pump, args=(upstream, self.connection), daemon=True)
                back.start()
                pump(self.connection, upstream)
                back.join(5)

            def _forward(self):
                self._record()
                parts = urllib.parse.urlsplit(self.path)
                netloc = parts.netloc if parts.port else f"{parts.netloc}:80"
                n = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(n) if n else None
                conn = http.client.HTTPConnection(*proxy.routes[netloc], timeout=5)
                headers = {k: v for k, v in self.headers.items() if not k.lower().startswith("proxy-")}
                conn.request(
                    self.command, parts.path + (f"?{parts.query}" if parts.query else ""), body=body, headers=headers
                )
                resp = conn.getresponse()
                data = resp.read()
                conn.close()
                self.send_response(resp.status)
                self.send_header("Content-Type", resp.getheader("Content-Type", ""))
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _forward

        return Handler


@pytest.fixture
def forward_proxy():
    started = []

    def start(routes):
        p = ForwardProxy(routes)
        started.append(p)
        return p

    yield start
    for p in started:
        p.close()


def address(url):
    parts = urllib.parse.urlsplit(url)
    return parts.hostname, parts.port


def test_http_urls_go_through_http_proxy_with_its_credentials(fake_server, forward_proxy, monkeypatch):
    srv = fake_server()
    proxy = forward_proxy({"vllm.test:8000": address(srv.url)})
    monkeypatch.setenv("HTTP_PROXY", proxy.url.replace("://", "://qg:s%40cret@"))
    with open_backend(server_config(["http://vllm.test:8000"])) as backend:
        gens = backend.generate(some_requests(3))
        info = backend.info()
    assert [g.text for g in gens] == ["#### 1", "#### 2", "#### 3"]
    assert info["proxies"] == {"http://vllm.test:8000": proxy.url}  # no credentials
    posts = [s for s in proxy.seen if s[0] == "POST"]
    assert len(posts) == 3
    assert all(t == "http://vllm.test:8000/v1/chat/completions" for _, t, _ in posts)
    assert {a for _, _, a in proxy.seen} == {"Basic cWc6c0BjcmV0"}  # qg:s@cret


@pytest.mark.slow
def test_https_urls_are_tunnelled_through_https_proxy_and_verified(fake_server, forward_proxy, monkeypatch):
    srv = fake_server(tls=(TLS / "server.pem", TLS / "server.key"))
    proxy = forward_proxy({"vllm.test:8443": address(srv.url)})
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # not for https:// URLs
    monkeypatch.setenv("SSL_CERT_FILE", str(TLS / "ca.pem"))
    with open_backend(server_config(["https://vllm.test:8443"], concurrency=1)) as backend:
        gens = backend.generate(some_requests(4))
        assert backend.info()["connections_opened"] == 1  # one tunnel, kept alive
    assert [g.text for g in gens] == ["#### 1", "#### 2", "#### 3", "#### 4"]
    assert proxy.seen == [("CONNECT", "vllm.test:8443", None)]


def test_a_certificate_the_client_does_not_trust_is_refused_naming_the_url(fake_server, forward_proxy, monkeypatch):
    srv = fake_server(tls=(TLS / "server.pem", TLS / "server.key"))
    proxy = forward_proxy({"vllm.test:8443": address(srv.url)})
    monkeypatch.setenv("HTTPS_PROXY", proxy.url)
    monkeypatch.setenv("SSL_CERT_FILE", str(TLS / "server.key"))  # no CA in it
    with pytest.raises(
        DataError,
        match=r"cannot reach https://vllm.test:8443/v1/models "
        r"\(protocol: SSLCertVerificationError",
    ):
        open_backend(server_config(["https://vllm.test:8443"]))


def test_proxy_choice_follows_the_environment(monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.corp:3128")
    monkeypatch.setenv("https_proxy", "proxy.corp:8080")  # no scheme: http:// is meant
    monkeypatch.setenv("NO_PROXY", "gpu-a.corp,.internal")
    assert proxy_for("http://gpu-b.corp:8000").netloc == "proxy.corp:3128"
    assert proxy_for("https://gpu-b.corp").netloc == "proxy.corp:8080"
    assert proxy_for("http://gpu-a.corp:8000") is None
    assert proxy_for("http://node1.internal:8000") is None
    for loopback in ("http://localhost:8000", "http://127.0.0.1:8000", "http://[::1]:8000"):
        assert proxy_for(loopback) is None  # never proxied
    monkeypatch.setenv("HTTP_PROXY", "socks5://proxy.corp:1080")
    with pytest.raises(ValueError, match="only http:// proxies"):
        proxy_for("http://gpu-b.corp:8000")


def test_an_unusable_proxy_is_a_config_error_naming_the_url(monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "socks5://proxy.corp:1080")
    with pytest.raises(DataError, match="engine_options.base_urls.*only http:// proxies"):
        open_backend(server_config(["http://gpu-b.corp:8000"]))


def test_the_deadline_covers_the_whole_exchange_not_each_receive():
    """A server that sends one byte every 0.1 s never trips a per-receive timeout."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def drip():
        conn, _ = listener.accept()
        conn.recv(65536)
        for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 1000:
            if stop.wait(0.1):
                break
            try:
                conn.sendall(bytes([byte]))
            except OSError:
                break
        conn.close()

    threading.Thread(target=drip, daemon=True).start()
    client = Client({})
    t0 = time.perf_counter()
    with pytest.raises(TransportError, match="no complete response within 0.5 s") as info:
        client.request("GET", f"http://127.0.0.1:{listener.getsockname()[1]}", "/", None, timeout=0.5, max_bytes=10_000)
    elapsed = time.perf_counter() - t0
    stop.set()
    listener.close()
    assert info.value.kind == "timeout" and 0.5 <= elapsed < 1.5
