"""A real HTTP server on 127.0.0.1 for the fetcher's tests: files from a folder, and routes that
fail the ways servers fail. Each route is a prefix of the path:

- ``/files/<path>``: the file, with its length;
- ``/missing/<path>``: 404;
- ``/truncated/<path>``: announces the whole length, sends half, closes the connection;
- ``/wrong/<path>``: a well-formed file of other content (one byte changed, gzipped again if
  the file was gzipped);
- ``/stall/<path>``: announces the length, sends a few bytes, then nothing until the server
  stops;
- ``/trickle/<path>``: announces the length, then sends a byte every 50 ms until the server
  stops (no read ever waits long, the whole never arrives);
- ``/html/<path>``: an HTML page with status 200 (a captive portal, a login or error page);
- ``/held/<path>``: the file, once :attr:`LocalServer.release` is set (until then, a server
  that accepted the connection and does not answer).

Every request is counted by its path (:attr:`LocalServer.counts`).
"""
import gzip
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class LocalServer:
    """A :class:`ThreadingHTTPServer` on a free port of 127.0.0.1, serving ``root``."""

    def __init__(self, root):
        self.root = Path(root)
        self.counts = Counter()
        self.release = threading.Event()  # lets /held/ answer
        self.stopping = threading.Event()  # ends /stall/ and /held/ waits
        self.requested = threading.Event()  # set at the first request
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):  # noqa: N802 -- http.server's name
                with server._lock:
                    server.counts[self.path] += 1
                server.requested.set()
                route, _, relative = self.path.lstrip("/").partition("/")
                path = server.root / relative
                if route == "missing" or not path.is_file() or ".." in relative:
                    self.send_error(404)
                    return
                content = path.read_bytes()
                if route == "wrong":
                    content = _other_content(content)
                if route == "html":
                    content = b"<!DOCTYPE html>\n<html><body>Please sign in</body></html>\n"
                if route == "held":
                    server.release.wait(60)
                self.send_response(200)
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                if route == "truncated":
                    self.wfile.write(content[:len(content) // 2])
                    self.close_connection = True
                elif route == "trickle":
                    for byte in content:
                        if server.stopping.wait(0.05):
                            break
                        try:
                            self.wfile.write(bytes([byte]))
                            self.wfile.flush()
                        except OSError:  # the client gave up
                            break
                elif route == "stall":
                    self.wfile.write(content[:10])
                    self.wfile.flush()
                    server.stopping.wait(30)
                else:
                    self.wfile.write(content)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def base(self):
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def url(self, route, relative=""):
        return f"{self.base}/{route}/{relative}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def _other_content(content):
    """``content`` with its middle byte changed; gzipped again if it was gzipped."""
    compressed = content[:2] == b"\x1f\x8b"
    raw = bytearray(gzip.decompress(content) if compressed else content)
    raw[len(raw) // 2] ^= 0xFF
    return gzip.compress(bytes(raw)) if compressed else bytes(raw)
