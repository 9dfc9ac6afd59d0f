"""A network that lets nothing out, for download code run offline."""
import contextlib
import http.server
import threading


@contextlib.contextmanager
def refusing_proxy():
    """An HTTP proxy on 127.0.0.1 answering every request with 403; yields its URL and
    the list of paths asked for."""
    requests = []

    class Refuse(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            requests.append(self.path)
            self.send_error(403, "offline")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", requests
    finally:
        server.shutdown()
        server.server_close()
