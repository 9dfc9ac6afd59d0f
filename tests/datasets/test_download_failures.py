"""Downloads that stall or break, and archives that cannot be extracted safely."""
import hashlib
import http.server
import io
import socket
import tarfile
import threading
import time

import pytest

from datasets import download

PAYLOAD = bytes(range(256)) * 64  # 16 KiB


class _Server:
    """An HTTP server on 127.0.0.1 whose GET handler is given; stopped on exit."""

    def __init__(self, handle_get):
        handler = type('Handler', (http.server.BaseHTTPRequestHandler,), {
            'do_GET': handle_get, 'log_message': lambda *args: None})
        self.server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
        self.server.daemon_threads = True
        self.url = f'http://127.0.0.1:{self.server.server_address[1]}/data.bin'
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


def test_a_server_that_stalls_after_its_headers_times_out(tmp_path):
    release = threading.Event()

    def stall(handler):
        handler.send_response(200)
        handler.send_header('Content-Length', str(len(PAYLOAD)))
        handler.end_headers()
        handler.wfile.write(PAYLOAD[:100])
        handler.wfile.flush()
        release.wait(30)  # then silence

    target = tmp_path / 'data.bin'
    with _Server(stall) as server:
        started = time.monotonic()
        with pytest.raises(download.DownloadError) as error:
            download.download_file(server.url, str(target),
                                   hashlib.sha256(PAYLOAD).hexdigest(),
                                   read_timeout_secs=0.5, retries=1)
        elapsed = time.monotonic() - started
        release.set()
    message = str(error.value)
    assert 'timed out' in message and 'run again to resume' in message, message
    # Two attempts of 0.5 s each and a 1 s wait between them; far below 30 s.
    assert elapsed < 10
    assert not target.exists()
    # Kept for the next run to resume (this server ignores Range: each attempt restarts).
    assert (tmp_path / 'data.bin.part').read_bytes() == PAYLOAD[:100]


def test_a_broken_download_resumes_with_a_range_request(tmp_path):
    ranges = []

    def serve(handler):
        requested = handler.headers.get('Range')
        ranges.append(requested)
        if requested is None:  # the first attempt breaks off half-way
            handler.send_response(200)
            handler.send_header('Content-Length', str(len(PAYLOAD)))
            handler.end_headers()
            handler.wfile.write(PAYLOAD[:5000])
            handler.wfile.flush()
            handler.connection.shutdown(socket.SHUT_RDWR)
            return
        start = int(requested.split('=')[1].rstrip('-'))
        handler.send_response(206)
        handler.send_header('Content-Length', str(len(PAYLOAD) - start))
        handler.send_header('Content-Range', f'bytes {start}-{len(PAYLOAD) - 1}/{len(PAYLOAD)}')
        handler.end_headers()
        handler.wfile.write(PAYLOAD[start:])

    target = tmp_path / 'data.bin'
    with _Server(serve) as server:
        download.download_file(server.url, str(target), hashlib.sha256(PAYLOAD).hexdigest(),
                               read_timeout_secs=5, retries=2)
    assert target.read_bytes() == PAYLOAD
    assert ranges == [None, 'bytes=5000-']
    assert sorted(p.name for p in tmp_path.iterdir()) == ['data.bin']


def _tar(path, members):
    with tarfile.open(path, 'w') as tar:
        for name, kind, data in members:
            info = tarfile.TarInfo(name)
            if kind == 'dir':
                info.type = tarfile.DIRTYPE
            elif kind == 'file':
                info.size = len(data)
            else:
                info.type, info.linkname = tarfile.SYMTYPE, data
            tar.addfile(info, io.BytesIO(data) if kind == 'file' else None)


def test_a_symlink_chain_out_of_the_target_is_refused_and_leaves_nothing(tmp_path):
    archive = tmp_path / 'chain.tar'
    # e -> f/.. is the root, so d -> e/.. is its parent and d/evil lands outside.
    _tar(archive, [('ok.txt', 'file', b'fine'), ('f', 'dir', None), ('e', 'link', 'f/..'),
                   ('d', 'link', 'e/..'), ('d/evil', 'file', b'evil')])
    target = tmp_path / 'out'
    with pytest.raises(download.UnsafeArchiveError, match="'d'|'d/evil'"):
        download.extract_tar(str(archive), str(target))
    assert list(target.iterdir()) == []
    assert not (tmp_path / 'evil').exists()


def test_a_corrupt_archive_is_one_error_and_leaves_nothing(tmp_path):
    archive = tmp_path / 'cut.tar'
    _tar(archive, [('a.txt', 'file', b'a' * 5000), ('b.txt', 'file', b'b' * 50000)])
    archive.write_bytes(archive.read_bytes()[:8000])  # cut inside b.txt
    target = tmp_path / 'out'
    with pytest.raises(download.UnsafeArchiveError, match='corrupt or incomplete'):
        download.extract_tar(str(archive), str(target))
    assert list(target.iterdir()) == []
