import hashlib
import http.server
import io
import tarfile
import threading

import pytest

from datasets import download


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_download_file_verifies_and_renames(http_server, tmp_path):
    (http_server.directory / "a.bin").write_bytes(b"payload")
    target = tmp_path / "out" / "a.bin"

    download.download_file(http_server.base_url + "a.bin", str(target), _sha256(b"payload"))

    assert target.read_bytes() == b"payload"
    assert [p.name for p in target.parent.iterdir()] == ["a.bin"]


def test_checksum_mismatch_deletes_the_download(http_server, tmp_path):
    (http_server.directory / "a.bin").write_bytes(b"tampered")

    with pytest.raises(download.ChecksumError, match="Checksum mismatch.*a.bin"):
        download.download_file(http_server.base_url + "a.bin", str(tmp_path / "a.bin"),
                               _sha256(b"payload"))

    assert list(tmp_path.iterdir()) == [http_server.directory]  # Nothing new left behind.


def test_verified_file_is_not_downloaded_again(http_server, tmp_path):
    (tmp_path / "a.bin").write_bytes(b"payload")

    download.download_file(http_server.base_url + "a.bin", str(tmp_path / "a.bin"),
                           _sha256(b"payload"))

    assert http_server.requests == []


def test_a_file_with_another_checksum_is_kept_aside_once_a_good_copy_arrived(
        http_server, tmp_path):
    (http_server.directory / "a.bin").write_bytes(b"payload")
    (tmp_path / "a.bin").write_bytes(b"truncat")

    downloaded = download.fetch_file(http_server.base_url + "a.bin", str(tmp_path / "a.bin"),
                                     _sha256(b"payload"))

    assert downloaded
    assert (tmp_path / "a.bin").read_bytes() == b"payload"
    assert (tmp_path / "a.bin.mismatch").read_bytes() == b"truncat"  # never deleted
    assert http_server.requests == ["/a.bin"]


def test_a_file_with_another_checksum_is_left_as_it_is_when_the_download_fails(
        http_server, tmp_path):
    theirs = b"the user's own"
    (tmp_path / "a.bin").write_bytes(theirs)

    with pytest.raises(download.DownloadError) as error:
        download.download_file(http_server.base_url + "absent.bin", str(tmp_path / "a.bin"),
                               _sha256(b"payload"))

    message = str(error.value)
    assert "\n" not in message
    assert f"{tmp_path / 'a.bin'} has sha256 {_sha256(theirs)}" in message
    assert f"not the expected {_sha256(b'payload')}, and was left as it is" in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin", "served"]
    assert (tmp_path / "a.bin").read_bytes() == theirs


def test_a_verified_copy_already_there_is_reported_as_not_downloaded(http_server, tmp_path):
    (tmp_path / "a.bin").write_bytes(b"payload")
    assert not download.fetch_file(http_server.base_url + "a.bin", str(tmp_path / "a.bin"),
                                   _sha256(b"payload"))


def test_a_failed_download_mentions_a_part_file_only_when_one_was_left(tmp_path):
    class Unavailable(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_error(503)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Unavailable)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with pytest.raises(download.DownloadError) as error:
            download.download_file(f"http://127.0.0.1:{server.server_address[1]}/a.bin",
                                   str(tmp_path / "a.bin"), _sha256(b"payload"), retries=0)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert ".part" not in str(error.value) and "run again" in str(error.value)
    assert list(tmp_path.iterdir()) == []


def test_missing_url_raises_download_error_and_leaves_nothing(http_server, tmp_path):
    target_dir = tmp_path / "out"
    target_dir.mkdir()

    with pytest.raises(download.DownloadError, match="Could not download"):
        download.download_file(http_server.base_url + "absent.bin", str(target_dir / "a"),
                               _sha256(b""))

    assert list(target_dir.iterdir()) == []


def _make_tar(path, members):
    """members: (TarInfo kwargs, data or None)."""
    with tarfile.open(path, "w:gz") as tar:
        for fields, data in members:
            info = tarfile.TarInfo(fields.pop("name"))
            for key, value in fields.items():
                setattr(info, key, value)
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)


def test_extract_tar_extracts_regular_members(tmp_path):
    archive = tmp_path / "ok.tar.gz"
    _make_tar(archive, [({"name": "d", "type": tarfile.DIRTYPE}, None),
                        ({"name": "d/f.bin"}, b"abc"),
                        ({"name": "d/link", "type": tarfile.SYMTYPE, "linkname": "f.bin"},
                         None)])

    download.extract_tar(str(archive), str(tmp_path / "out"))

    assert (tmp_path / "out" / "d" / "f.bin").read_bytes() == b"abc"
    assert (tmp_path / "out" / "d" / "link").read_bytes() == b"abc"


@pytest.mark.parametrize("member, reason", [
    ({"name": "../escape.txt"}, "contains '..'"),
    ({"name": "d/../../escape.txt"}, "contains '..'"),
    ({"name": "/tmp/absolute.txt"}, "absolute path"),
    ({"name": "link", "type": tarfile.SYMTYPE, "linkname": "/etc"}, "symlink"),
    ({"name": "link", "type": tarfile.SYMTYPE, "linkname": "../.."}, "symlink"),
    ({"name": "hard", "type": tarfile.LNKTYPE, "linkname": "../outside.txt"}, "hard link"),
    ({"name": "fifo", "type": tarfile.FIFOTYPE}, "special file"),
])
def test_extract_tar_refuses_escaping_members(tmp_path, member, reason):
    archive = tmp_path / "bad.tar.gz"
    is_file = member.get("type", tarfile.REGTYPE) == tarfile.REGTYPE
    # A harmless member first: refusal must happen before anything is written.
    _make_tar(archive, [({"name": "fine.txt"}, b"ok"),
                        (dict(member), b"evil" if is_file else None)])
    target = tmp_path / "inner" / "out"

    with pytest.raises(download.UnsafeArchiveError, match=reason) as error:
        download.extract_tar(str(archive), str(target))

    assert member["name"] in str(error.value)
    assert list(target.iterdir()) == []
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["bad.tar.gz", "inner", "out"]
