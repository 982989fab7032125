"""Writes a user sees the result of, all-or-nothing: a file (or a directory) is written under
a temporary name beside its target and renamed over it only once complete, so a full disk, a
read-only target or a kill leaves the old content or none, never part of a file. A failed
write removes its temporary and raises ``OutputError``: one sentence naming the path and the
reason (what the CLI prints, exit code 2).

A target that exists and is not a regular file or directory (``/dev/null``, ``/dev/full``, a
pipe) is written in place: there is no partial file to leave, and renaming over a device is
never right.

Example:
    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp()) / "result.json"
    >>> write_text(out, "{}\\n")
    >>> out.read_text(), sorted(p.name for p in out.parent.iterdir())
    ('{}\\n', ['result.json'])
    >>> try:
    ...     write_text("/dev/full", "x")
    ... except OutputError as error:
    ...     print(error)
    Cannot write /dev/full (No space left on device); free some space or pick another path.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from llmgym.errors import OutputError

#: What a failed write raises: OSError, and RuntimeError from torch's zip writer on a full
#: disk ("unexpected pos 64 vs 0", "PytorchStreamWriter failed writing file").
WRITE_ERRORS = (OSError, RuntimeError)
_NOT_WRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)


def _reason(error: BaseException) -> str:
    if isinstance(error, OSError):
        return error.strerror or errno.errorcode.get(error.errno or 0, type(error).__name__)
    return "the write stopped short, as on a full disk"  # torch's zip writer


def output_error(path: str | Path, error: BaseException) -> OutputError:
    """The one sentence for a write of ``path`` that failed with ``error``.

    Example:
        >>> print(output_error("out/a.png", OSError(errno.EROFS, "Read-only file system")))
        Cannot write out/a.png (Read-only file system); pick a writable path.
    """
    code = getattr(error, "errno", None)
    fix = "free some space or pick another path"
    if code in _NOT_WRITABLE:
        fix = "pick a writable path"
    elif code == errno.EISDIR:
        fix = "pass a file path, not a folder"
    elif code in (errno.ENOTDIR, errno.EEXIST):  # mkdir of a folder that is a file
        fix = "a folder on that path is a file; pick another path"
    return OutputError(f"Cannot write {path} ({_reason(error)}); {fix}.")


def _special(path: Path) -> bool:
    """Whether ``path`` exists and is neither a regular file nor a directory."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _temporary(path: Path) -> Path:
    """A new name beside ``path`` that keeps its suffix (``savefig`` reads the format)."""
    return path.with_name(f".{path.stem}.{secrets.token_hex(4)}.tmp{path.suffix}")


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink()


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path to write the file ``path`` to; once the block ends, the file is
    synced and renamed over ``path``. If the block or the rename fails, the temporary is
    removed; an OSError or RuntimeError becomes ``OutputError``, anything else propagates.

    Example:
        >>> import tempfile
        >>> out = Path(tempfile.mkdtemp()) / "a.txt"
        >>> with atomic_path(out) as tmp:
        ...     _ = tmp.write_text("done")
        >>> out.read_text()
        'done'
    """
    path = Path(path)
    if _special(path):
        try:
            yield path
        except OutputError:
            raise
        except WRITE_ERRORS as error:
            raise output_error(path, error) from None
        return
    tmp = _temporary(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))  # the umask applies
        yield tmp
        _fsync(tmp)
        os.replace(tmp, path)
    except OutputError as error:  # a nested all-or-nothing write said which file failed
        _remove(tmp)
        raise OutputError(str(error).replace(str(tmp), str(path))) from None
    except WRITE_ERRORS as error:
        _remove(tmp)
        raise output_error(path, error) from None
    except BaseException:
        _remove(tmp)
        raise


@contextlib.contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Yield a temporary directory (beside ``path``) to fill; once the block ends its entries
    move into ``path`` by rename (the whole directory when ``path`` does not exist yet; into
    it, replacing entries of the same names, when it does). Renames take no space, so a full
    disk or a read-only folder fails while the temporary is filled: then it is removed,
    ``path`` is left as it was, and an OSError or RuntimeError becomes ``OutputError``.

    Example:
        >>> import tempfile
        >>> out = Path(tempfile.mkdtemp()) / "policy"
        >>> for text in ("old", "new"):
        ...     with atomic_dir(out) as tmp:
        ...         _ = (tmp / "a.txt").write_text(text)
        >>> (out / "a.txt").read_text(), [p.name for p in out.parent.iterdir()]
        ('new', ['policy'])
    """
    path = Path(path)
    tmp = _temporary(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.mkdir()
        yield tmp
        if not path.exists():
            os.replace(tmp, path)
        else:
            for entry in sorted(tmp.iterdir()):
                os.replace(entry, path / entry.name)
            tmp.rmdir()
    except OutputError as error:  # a nested all-or-nothing write said which file failed
        _remove(tmp)
        raise OutputError(str(error).replace(str(tmp), str(path))) from None
    except WRITE_ERRORS as error:
        _remove(tmp)
        raise output_error(path, error) from None
    except BaseException:
        _remove(tmp)
        raise


def write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` all-or-nothing (see the module)."""
    with atomic_path(path) as tmp:
        if tmp == Path(path):  # a device or pipe: written in place
            with open(tmp, "wb", buffering=0) as f:
                f.write(data)
        else:
            tmp.write_bytes(data)


def write_figure(fig: Any, path: str | Path, **savefig: Any) -> None:
    """A matplotlib figure saved to ``path`` all-or-nothing, in the format its suffix names
    (PNG without one). The image is rendered in memory first: matplotlib's PNG writer does not
    report a failed write (``savefig("/dev/full")`` returns as if it had written)."""
    import io

    suffix = Path(path).suffix.lstrip(".").lower()
    buffer = io.BytesIO()
    fig.savefig(buffer, format=savefig.pop("format", None) or suffix or "png", **savefig)
    write_bytes(path, buffer.getvalue())


def write_text(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` all-or-nothing (see the module); characters UTF-8
    cannot hold (a path of undecodable bytes, as Python reads it) are written escaped."""
    write_bytes(path, text.encode("utf-8", "backslashreplace"))


__all__ = [
    "WRITE_ERRORS",
    "atomic_dir",
    "atomic_path",
    "output_error",
    "write_bytes",
    "write_figure",
    "write_text",
]
