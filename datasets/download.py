"""Checksummed downloads and safe tar extraction for the dataset converters."""
import hashlib
import http.client
import os
import posixpath
import shutil
import socket
import tarfile
import time
import urllib.error
import urllib.request

from absl import logging

from core import paths
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


# A server that accepts no connection, or sends nothing, for this long fails the attempt.
CONNECT_TIMEOUT_SECS = 30.0
READ_TIMEOUT_SECS = 60.0
RETRIES = 3  # further attempts after a failed one, each resuming the partial file
_RETRY_WAIT_SECS = (1.0, 4.0, 10.0)


class _TransientError(Exception):
    """A failed attempt worth retrying (timeout, reset connection, 5xx)."""


def download_file(url: str, path: str, sha256: str, **timeouts) -> str:
    """Downloads url to path unless a file with the expected sha256 is already there
    (see fetch_file); returns path."""
    fetch_file(url, path, sha256, **timeouts)
    return path


# A file already at the target with another checksum is renamed to this once a good
# copy arrived: the user may have put it there, so it is never deleted.
MISMATCH_SUFFIX = ".mismatch"


def fetch_file(url: str, path: str, sha256: str, *,
               connect_timeout_secs: float = CONNECT_TIMEOUT_SECS,
               read_timeout_secs: float = READ_TIMEOUT_SECS,
               retries: int = RETRIES) -> bool:
    """Makes path a file with the expected sha256, downloading url unless one is there.

    Returns whether it downloaded: False when a verified copy was already there (the
    user's, or an archive an earlier run kept), which callers must leave in place.
    The data goes to '<path>.part', renamed to path only after its checksum matches. A
    connection that stalls (no byte within read_timeout_secs) or breaks is retried,
    resuming the partial file with an HTTP Range request; after the last retry the
    partial file is kept, so running again resumes it. A checksum mismatch or a
    permanent error (404) deletes it. A file at path with another checksum is left as
    it is while downloading, then renamed to '<path>.mismatch' (never deleted).
    """
    found = sha256_of_file(path) if os.path.exists(path) else None
    if found == sha256:
        logging.info("Using already downloaded %s", path)
        return False
    if found is not None:
        logging.warning("%s has sha256 %s, not the expected %s; downloading a good copy "
                        "(that file is kept: renamed to %s%s once the copy arrived)", path,
                        found, sha256, os.path.basename(path), MISMATCH_SUFFIX)
    try:
        _download(url, path + ".part", sha256, connect_timeout_secs, read_timeout_secs,
                  retries)
    except DownloadError as error:
        if found is None:
            raise
        raise type(error)(f"{path} has sha256 {found}, not the expected {sha256}, and was "
                          f"left as it is; downloading a good copy failed: {error}") from None
    if found is not None:
        kept = paths.set_aside(path, MISMATCH_SUFFIX)
        logging.warning("Kept the file that was at %s as %s", path, kept)
    os.replace(path + ".part", path)
    return True


def _download(url: str, partial: str, sha256: str, connect_timeout_secs: float,
              read_timeout_secs: float, retries: int) -> None:
    """Downloads url into partial (resuming it) and verifies its sha256."""
    directory = os.path.dirname(os.path.abspath(partial))
    os.makedirs(directory, exist_ok=True)
    for attempt in range(retries + 1):
        try:
            _fetch(url, partial, connect_timeout_secs, read_timeout_secs)
            break
        except _TransientError as error:
            if attempt == retries:
                raise DownloadError(f"Could not download {url} in {retries + 1} attempts "
                                    f"({error}); {_what_is_kept(partial)}") from None
            wait = _RETRY_WAIT_SECS[min(attempt, len(_RETRY_WAIT_SECS) - 1)]
            logging.warning("Download of %s failed (%s); retrying in %g s.", url, error, wait)
            time.sleep(wait)
        except BaseException:
            _remove_quietly(partial)
            raise
    actual = sha256_of_file(partial)
    if actual != sha256:
        _remove_quietly(partial)
        raise ChecksumError(
            f"Checksum mismatch for {url}: expected sha256 {sha256}, got {actual}; "
            f"the download was deleted, retry later or check that the URL is right.")


def _what_is_kept(partial: str) -> str:
    """The end of a failed download's message: a .part is mentioned only if it holds bytes."""
    if os.path.exists(partial) and os.path.getsize(partial):
        return (f"{partial} keeps what arrived: run again to resume, or check the network "
                f"connection.")
    _remove_quietly(partial)
    return "check the network connection, then run again."


def _remove_quietly(path: str) -> None:
    if os.path.exists(path):
        os.remove(path)


def _set_read_timeout(response, seconds: float) -> None:
    """After connecting, a socket read waits at most this long (urllib has one timeout)."""
    sock = getattr(getattr(getattr(response, "fp", None), "raw", None), "_sock", None)
    if sock is not None:
        sock.settimeout(seconds)


def _fetch(url: str, partial: str, connect_timeout_secs: float,
           read_timeout_secs: float) -> None:
    """Appends url's bytes to partial, resuming after what it holds when the server
    honours Range; raises _TransientError for failures worth retrying."""
    have = os.path.getsize(partial) if os.path.exists(partial) else 0
    request = urllib.request.Request(url)
    if have and url.startswith(("http://", "https://")):
        request.add_header("Range", f"bytes={have}-")
    logging.info("Downloading %s%s", url, f" (resuming after {have} bytes)" if have else "")
    try:
        with urllib.request.urlopen(request, timeout=connect_timeout_secs) as response:
            _set_read_timeout(response, read_timeout_secs)
            resumed = getattr(response, "status", None) == 206
            if not resumed:
                have = 0  # the server sends everything: start over
            total = int(response.headers.get("Content-Length") or 0)
            progress = ProgressBar(posixpath.basename(url), (have + total) or None,
                                   unit="bytes")
            done = have
            with open(partial, "ab" if resumed else "wb") as out:
                # read1: what has arrived, so a stall keeps the bytes before it.
                read = getattr(response, "read1", response.read)
                for chunk in iter(lambda: read(_CHUNK_BYTES), b""):
                    out.write(chunk)
                    done += len(chunk)
                    progress.update(done)
            progress.close()
            if total and done - have < total:
                raise _TransientError(f"the connection closed after {done} bytes")
    except urllib.error.HTTPError as e:
        if e.code == 416 and have:  # the partial file is complete already
            return
        if e.code >= 500 or e.code == 429:
            raise _TransientError(f"HTTP {e.code}") from None
        raise DownloadError(f"Could not download {url} ({e}); check the URL, then run "
                            f"again.") from None
    except (socket.timeout, TimeoutError):
        raise _TransientError(f"no data for {read_timeout_secs:g} s: timed out") from None
    except urllib.error.URLError as e:
        if isinstance(e.reason, (socket.timeout, TimeoutError)):
            raise _TransientError(f"no connection within {connect_timeout_secs:g} s: "
                                  f"timed out") from None
        if isinstance(e.reason, ConnectionError):
            raise _TransientError(str(e.reason)) from None
        raise DownloadError(f"Could not download {url} ({e}); check the network "
                            f"connection and the URL, then run again.") from None
    except (ConnectionError, http.client.HTTPException) as e:
        raise _TransientError(str(e) or type(e).__name__) from None
    except OSError as e:
        raise DownloadError(f"Could not download {url} ({e}); check the network "
                            f"connection and the URL, then run again.") from None


def _resolve(name: str, links: dict, depth: int = 0):
    """The archive-relative path `name` designates once the archive's symlinks (links:
    member name -> link target) exist, or None if it escapes the archive's root."""
    if depth > 40:
        return None  # a symlink loop
    parts = []
    for component in name.replace("\\", "/").split("/"):
        if component in ("", "."):
            continue
        if component == "..":
            if not parts:
                return None
            parts.pop()
            continue
        parts.append(component)
        joined = "/".join(parts)
        if joined in links:
            target = links[joined]
            if posixpath.isabs(target):
                return None
            resolved = _resolve(posixpath.join(posixpath.dirname(joined), target), links,
                                depth + 1)
            if resolved is None:
                return None
            parts = [p for p in resolved.split("/") if p]
    return "/".join(parts)


def _check_member(member: tarfile.TarInfo, links: dict, archive: str) -> None:
    """Raises UnsafeArchiveError unless member, and what it links to, stays inside the
    extraction directory once every symlink of the archive exists (chains included)."""
    def refuse(reason):
        raise UnsafeArchiveError(
            f"Refusing to extract {archive}: member {member.name!r} {reason}; "
            f"the archive is corrupt or malicious, delete it and download it again.")

    name = member.name
    if posixpath.isabs(name) or os.path.isabs(name):
        refuse("has an absolute path")
    if ".." in name.replace("\\", "/").split("/"):
        refuse("contains '..'")
    parent = posixpath.dirname(name.rstrip("/"))
    if _resolve(parent, links) is None:
        refuse("resolves outside the target directory (through a symlink)")
    if member.issym():
        if posixpath.isabs(member.linkname) or _resolve(name, links) is None:
            refuse(f"is a symlink pointing outside the target directory ({member.linkname})")
    elif member.islnk():
        # Hard link names are relative to the archive root.
        if posixpath.isabs(member.linkname) or _resolve(member.linkname, links) is None:
            refuse(f"is a hard link pointing outside the target directory ({member.linkname})")
    elif not (member.isfile() or member.isdir()):
        refuse("is a device, fifo or other special file")


def extract_tar(archive: str, target_dir: str) -> None:
    """Extracts a (possibly compressed) tar archive into target_dir.

    Every member is checked before anything is written: members may not escape
    target_dir by absolute paths, '..', or symlinks/hard links (or chains of them)
    pointing outside. Any failure, a refused member or a corrupt archive, is an
    UnsafeArchiveError; the entries it added to target_dir are removed (files it wrote
    into folders target_dir already had are not tracked).
    """
    target_dir = os.path.realpath(target_dir)
    os.makedirs(target_dir, exist_ok=True)
    logging.info("Extracting %s to %s", archive, target_dir)
    existed = set(os.listdir(target_dir))
    try:
        with tarfile.open(archive) as tar:
            members = tar.getmembers()
            links = {m.name.rstrip("/"): m.linkname for m in members if m.issym()}
            for member in members:
                _check_member(member, links, archive)
            # The 'data' filter is a second line of defence (and drops unsafe permissions).
            tar.extractall(target_dir, members=members, filter="data")
    except BaseException as error:
        for name in set(os.listdir(target_dir)) - existed:
            path = os.path.join(target_dir, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.remove(path)
        if isinstance(error, UnsafeArchiveError):
            raise
        if isinstance(error, (tarfile.TarError, OSError, EOFError, ValueError)):
            raise UnsafeArchiveError(
                f"Could not extract {archive} ({error}); the archive is corrupt or "
                f"incomplete: delete it and download it again.") from None
        raise
