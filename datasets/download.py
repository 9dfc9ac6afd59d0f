"""Checksummed downloads and safe tar extraction for the dataset converters."""
import hashlib
import os
import posixpath
import tarfile
import tempfile
import urllib.error
import urllib.request

from absl import logging

from core.progress import ProgressBar

_CHUNK_BYTES = 1 << 20


class DownloadError(RuntimeError):
    """A download or archive could not be used; the message says what to do."""


class ChecksumError(DownloadError):
    """A downloaded file does not have the expected sha256."""


class UnsafeArchiveError(DownloadError):
    """An archive member would be written outside the extraction directory."""


def sha256_of_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


def download_file(url: str, path: str, sha256: str) -> str:
    """Downloads url to path unless a file with the expected sha256 is already there.

    The data goes to a temporary file in the same directory, which is renamed to path
    only after its checksum matches; on any failure the temporary file is deleted.
    Returns path.
    """
    if os.path.exists(path):
        if sha256_of_file(path) == sha256:
            logging.info("Using already downloaded %s", path)
            return path
        logging.warning("Checksum of existing %s does not match; downloading it again", path)
        os.remove(path)

    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, temp_path = tempfile.mkstemp(dir=directory, prefix=os.path.basename(path) + ".",
                                     suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out:
            actual = _fetch(url, out)
        if actual != sha256:
            raise ChecksumError(
                f"Checksum mismatch for {url}: expected sha256 {sha256}, got {actual}; "
                f"the download was deleted, retry later or check that the URL is right.")
        os.replace(temp_path, path)
    finally:
        if os.path.exists(temp_path):
            os.remove(temp_path)
    return path


def _fetch(url: str, out) -> str:
    """Streams url into the open file out and returns the sha256 of what was written."""
    digest = hashlib.sha256()
    logging.info("Downloading %s", url)
    try:
        with urllib.request.urlopen(url) as response:
            total = int(response.headers.get("Content-Length") or 0)
            progress = ProgressBar(posixpath.basename(url), total or None, unit="bytes")
            done = 0
            for chunk in iter(lambda: response.read(_CHUNK_BYTES), b""):
                out.write(chunk)
                digest.update(chunk)
                done += len(chunk)
                progress.update(done)
            progress.close()
    except (urllib.error.URLError, OSError) as e:
        raise DownloadError(f"Could not download {url} ({e}); check the network "
                            f"connection and the URL, then run again.") from e
    return digest.hexdigest()


def _is_within(directory: str, path: str) -> bool:
    return os.path.commonpath([directory, path]) == directory


def _check_member(member: tarfile.TarInfo, target_dir: str, archive: str) -> None:
    """Raises UnsafeArchiveError unless member stays inside target_dir."""
    def refuse(reason):
        raise UnsafeArchiveError(
            f"Refusing to extract {archive}: member {member.name!r} {reason}; "
            f"the archive is corrupt or malicious, delete it and download it again.")

    name = member.name
    if posixpath.isabs(name) or os.path.isabs(name):
        refuse("has an absolute path")
    if ".." in name.replace("\\", "/").split("/"):
        refuse("contains '..'")
    destination = os.path.realpath(os.path.join(target_dir, name))
    if not _is_within(target_dir, destination):
        refuse("resolves outside the target directory")
    if member.issym():
        link_target = os.path.realpath(
            os.path.join(os.path.dirname(destination), member.linkname))
        if os.path.isabs(member.linkname) or not _is_within(target_dir, link_target):
            refuse(f"is a symlink pointing outside the target directory ({member.linkname})")
    elif member.islnk():
        # Hard link names are relative to the archive root.
        link_target = os.path.realpath(os.path.join(target_dir, member.linkname))
        if os.path.isabs(member.linkname) or not _is_within(target_dir, link_target):
            refuse(f"is a hard link pointing outside the target directory ({member.linkname})")
    elif not (member.isfile() or member.isdir()):
        refuse("is a device, fifo or other special file")


def extract_tar(archive: str, target_dir: str) -> None:
    """Extracts a (possibly compressed) tar archive into target_dir.

    Every member is checked before anything is written, so a refused archive leaves
    nothing behind; members may not escape target_dir by absolute paths, '..',
    or symlinks/hard links pointing outside.
    """
    target_dir = os.path.realpath(target_dir)
    os.makedirs(target_dir, exist_ok=True)
    logging.info("Extracting %s to %s", archive, target_dir)
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
        for member in members:
            _check_member(member, target_dir, archive)
        # The 'data' filter is a second line of defence (and drops unsafe permissions).
        tar.extractall(target_dir, members=members, filter="data")
