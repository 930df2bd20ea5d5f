"""Safe file helpers: atomic writes, YAML without code execution, npz without pickle.

A crash (or SIGKILL) in the middle of a write never leaves a half-written file under the final
name: data go to a temporary file in the same folder, are flushed to disk, then renamed over
the target in one step (``os.replace`` is atomic on POSIX and Windows).
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from mjsysid.util.errors import must_be


def _prepare_parent(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OSError(f"cannot create folder {str(path.parent)!r} for {path.name!r}: {e}") from e


def _file_mode() -> int:
    """``0o666`` less the process umask (what ``open()`` would give a new file)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _write_temp(path: Path, payload: bytes) -> Path:
    """Writes ``payload`` to a fresh temporary file next to ``path`` (flushed to disk)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise OSError(f"cannot write {str(path)!r}: {e}") from e
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, _file_mode())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def atomic_write_bytes(path: str | Path, payload: bytes) -> Path:
    """Writes ``payload`` to ``path`` atomically, creating parent folders.

    Raises:
      OSError: The folder cannot be created or written, with the path in the message.
    """
    path = Path(path)
    _prepare_parent(path)
    tmp = _write_temp(path, payload)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def atomic_write_files(folder: str | Path, payloads: Mapping[str, bytes], commit: str) -> Path:
    """Writes several files of ``folder`` so that a crash never loses the previous set.

    Every payload is first written to a temporary file; the folder's files are untouched until
    all of them are on disk. Then ``commit`` (the file whose presence marks the set complete)
    is removed, the others are renamed into place, and ``commit`` is renamed last. Other files
    in the folder are left alone.
    """
    folder = Path(folder)
    _prepare_parent(folder / commit)
    temps: dict[str, Path] = {}
    try:
        for name, payload in payloads.items():
            temps[name] = _write_temp(folder / name, payload)
        (folder / commit).unlink(missing_ok=True)
        for name, tmp in temps.items():
            if name != commit:
                os.replace(tmp, folder / name)
        os.replace(temps[commit], folder / commit)
    except BaseException:
        for tmp in temps.values():
            tmp.unlink(missing_ok=True)
        raise
    return folder


def atomic_write_text(path: str | Path, text: str) -> Path:
    """UTF-8 text version of :func:`atomic_write_bytes`."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """A compressed ``.npz`` of numeric arrays, in memory (object arrays are refused)."""
    for key, arr in arrays.items():
        if np.asarray(arr).dtype == object:
            raise TypeError(must_be(f"npz entry {key!r}", "a numeric or string array", arr))
    buf = io.BytesIO()
    np.savez_compressed(buf, **{k: np.asarray(v) for k, v in arrays.items()})  # type: ignore[arg-type]
    return buf.getvalue()


def atomic_savez(path: str | Path, arrays: Mapping[str, np.ndarray]) -> Path:
    """Saves numeric arrays to a compressed ``.npz`` atomically (object arrays are refused)."""
    return atomic_write_bytes(path, npz_bytes(arrays))


def load_npz(path: str | Path, required: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
    """Loads an ``.npz`` without pickle and checks that ``required`` keys are present.

    Raises:
      FileNotFoundError: No such file.
      ValueError: Not a readable npz (truncated, foreign format) or missing keys.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {str(path)!r}")
    if not zipfile.is_zipfile(path):  # np.load would talk about pickled data
        raise ValueError(f"{str(path)!r} is not a readable .npz file (not a zip archive)")
    try:
        with open(path, "rb") as f, np.load(f, allow_pickle=False) as z:
            out = {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as e:
        raise ValueError(f"{str(path)!r} is not a readable .npz file ({e})") from e
    missing = [k for k in required if k not in out]
    if missing:
        raise ValueError(
            f"{str(path)!r} must contain arrays {list(required)}, missing {missing}; "
            f"found {sorted(out)}"
        )
    return out


def read_yaml(path: str | Path) -> Any:
    """Parses a YAML file with ``yaml.safe_load`` (python object tags are rejected).

    Raises:
      FileNotFoundError: No such file.
      ValueError: Invalid YAML or a tag that would construct Python objects.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {str(path)!r}")
    text = path.read_text(encoding="utf-8")
    try:
        return yaml.safe_load(text)
    except yaml.constructor.ConstructorError as e:
        raise ValueError(
            f"{str(path)!r}: unsupported YAML tag ({e.problem}); mjsysid only reads plain data "
            "and never constructs Python objects from files"
        ) from None
    except yaml.YAMLError as e:
        raise ValueError(f"{str(path)!r} is not valid YAML: {e}") from None


def remove_write_leftovers(folder: str | Path) -> list[str]:
    """Removes what interrupted writes left in ``folder``; returns the names removed.

    Those are the temporary files of :func:`atomic_write_bytes` / :func:`atomic_write_files`
    (``.<name>.<random>.tmp``) and the private folders of the HTML report (``.report-*``). Only
    call it while no other writer uses the folder (hold :func:`mjsysid.util.lock.folder_lock`).
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    removed = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith(".") and entry.name.endswith(".tmp") and entry.is_file():
            entry.unlink(missing_ok=True)
        elif entry.name.startswith(".report-") and entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            continue
        removed.append(entry.name)
    return removed
