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
from typing import Any, BinaryIO

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


def write_error(e: OSError, path: str | Path, doing: str = "cannot write") -> OSError:
    """``e`` as an ``OSError`` of the same errno whose message names ``path``: a full disk
    says which file could not be written (``[Errno 28] cannot write 'out/result.npz': No
    space left on device``), not only ``No space left on device``."""
    reason = e.strerror or str(e) or type(e).__name__
    return OSError(e.errno, f"{doing} {str(path)!r}: {reason}")


def write_synced(f: BinaryIO, payload: bytes, path: str | Path) -> None:
    """Writes ``payload`` to the open file ``f``, flushes and syncs it to disk.

    Raises:
      OSError: The write, the flush or the sync failed (a full disk, a quota, a lost
        device); the message names ``path`` (see :func:`write_error`).
    """
    try:
        f.write(payload)
        f.flush()
        os.fsync(f.fileno())
    except OSError as e:
        raise write_error(e, path) from e


def _write_temp(path: Path, payload: bytes) -> Path:
    """Writes ``payload`` to a fresh temporary file next to ``path`` (flushed to disk)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise write_error(e, path) from e
    try:
        with os.fdopen(fd, "wb") as f:
            write_synced(f, payload, path)
        os.chmod(tmp, _file_mode())
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError) and str(path) not in str(e):  # close or chmod
            raise write_error(e, path) from e
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
            if Path(name).parent != Path("."):  # (a file of a subfolder: assets/tet.obj)
                _prepare_parent(folder / name)
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


def _yaml_error(e: yaml.YAMLError, where: str) -> str:
    """The parser's complaint with its line and column, without the snippet of the file that
    PyYAML quotes (the refused file may be anything: its contents are never echoed)."""
    if isinstance(e, yaml.MarkedYAMLError):
        mark = e.problem_mark or e.context_mark
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        parts = [p for p in (e.context, e.problem) if p]
        return f"{where} is not valid YAML{at}: {'; '.join(parts) or 'a syntax error'}"
    return f"{where} is not valid YAML ({type(e).__name__})"


def describe_yaml(data: Any) -> str:
    """What a YAML document holds, in words, without its contents."""
    if isinstance(data, str):
        return f"plain text of {len(data)} characters"
    if isinstance(data, list):
        return f"a list of {len(data)} items"
    return f"a single {type(data).__name__}"


def read_yaml(path: str | Path) -> Any:
    """Parses a YAML file with ``yaml.safe_load`` (python object tags are rejected).

    The document must be a mapping (``key: value`` lines) or empty (``None``), as every
    file mjsysid reads is; any other file (a system file, a CSV, a binary) is refused with
    what it holds in words, never with its contents. Its size is bounded by the limit
    ``max_file_bytes`` (:mod:`mjsysid.util.limits`).

    Raises:
      FileNotFoundError: No such file.
      OSError: It cannot be read (the message names it).
      ValueError: Too large, not UTF-8 text, invalid YAML (line and column), nested too
        deeply, not a mapping, or a tag that would construct Python objects.
    """
    from mjsysid.util.limits import check_limit

    path = Path(path)
    where = repr(str(path))
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {where}")
    try:
        check_limit("max_file_bytes", path.stat().st_size, f"{where}: bytes")
        raw = path.read_bytes()
    except OSError as e:
        raise write_error(e, path, "cannot read") from e
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(
            f"{where} must be a UTF-8 text file (YAML), got a byte that is not UTF-8 at "
            f"offset {e.start}; is it the right file?"
        ) from None
    try:
        data = yaml.safe_load(text)
    except yaml.constructor.ConstructorError as e:
        raise ValueError(
            f"{where}: unsupported YAML tag ({e.problem}); mjsysid only reads plain data "
            "and never constructs Python objects from files"
        ) from None
    except yaml.YAMLError as e:
        raise ValueError(_yaml_error(e, where)) from None
    except RecursionError:
        raise ValueError(
            f"{where} must be YAML nested at most a few hundred levels deep, got deeper "
            "nesting; is it the right file?"
        ) from None
    if data is not None and not isinstance(data, dict):
        raise ValueError(
            f"{path} must be a YAML mapping, got {type(data).__name__!r} "
            f"({describe_yaml(data)}); is it the right file?"
        )
    return data


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
