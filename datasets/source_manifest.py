"""What a folder conversion read: each source file's size and modification time, and the
class names, kept beside the TFRecords so a re-run can say exactly what changed since.

    {"source": "/abs/my_photos", "layout": "classes", "validation_percentage": 10.0,
     "class_names": ["daisy", "tulips"], "files": {"daisy/1.jpg": [48213, 1700000000000000000]}}
"""
import json
import os
from typing import Iterable

from datasets import dataset_utils

FILENAME = "source_manifest.json"
_EXAMPLES = 3  # file or class names a change description shows


def snapshot(source_dir: str, relative_paths: Iterable[str]) -> dict[str, list[int]]:
    """relative path -> [size in bytes, modification time in ns], for each file."""
    files = {}
    for relative in relative_paths:
        status = os.stat(os.path.join(source_dir, relative))
        files[relative] = [status.st_size, status.st_mtime_ns]
    return files


def read(dataset_dir: str) -> dict | None:
    path = os.path.join(dataset_dir, FILENAME)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def write(dataset_dir: str, manifest: dict) -> None:
    dataset_utils.write_json(os.path.join(dataset_dir, FILENAME), manifest)


def _describe(names: list, noun: tuple[str, str], verb: str) -> str:
    """'2 files added (a.jpg, b.jpg)'; noun is (singular, plural)."""
    shown = ", ".join(sorted(names)[:_EXAMPLES]) + (", ..." if len(names) > _EXAMPLES else "")
    return f"{len(names)} {noun[len(names) != 1]} {verb} ({shown})"


def changes(recorded: dict, current: dict) -> str | None:
    """What differs between two manifests, in words, e.g. '3 files added (tulips2/a.jpg,
    ...), 1 class added (tulips2)'; None when the same files and classes."""
    old_files, new_files = recorded.get("files", {}), current["files"]
    added = [p for p in new_files if p not in old_files]
    removed = [p for p in old_files if p not in new_files]
    changed = [p for p in new_files if p in old_files and list(old_files[p]) != new_files[p]]
    old_classes, new_classes = set(recorded.get("class_names", [])), set(current["class_names"])
    parts = []
    if recorded.get("layout") != current["layout"]:
        parts.append("now laid out as " + ("split folders (train/, val/, ...)"
                                           if current["layout"] == "splits"
                                           else "class folders"))
    files, classes = ("file", "files"), ("class", "classes")
    for names, noun, verb in ((added, files, "added"), (removed, files, "removed"),
                              (changed, files, "changed (size or time)"),
                              (list(new_classes - old_classes), classes, "added"),
                              (list(old_classes - new_classes), classes, "removed")):
        if names:
            parts.append(_describe(names, noun, verb))
    return ", ".join(parts) or None
