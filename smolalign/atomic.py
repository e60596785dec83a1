"""Files replaced whole or not at all: written to a temporary file in the same folder, flushed to disk, then renamed
over the target, so a reader (or a rerun after a kill -9 or a power loss) sees the old file or the complete new one,
never a torn one. Each gets the permissions a plain `open` would give it (the process's umask): a temporary file is
private to its owner (0600), so renamed as it is, a run's outputs on a shared cluster would be unreadable to the
team; `readable_as_created` does the same for what libraries wrote that way (safetensors 0.8 saves weights 0600)."""

import io
import os
import tempfile
from pathlib import Path

from smolalign.errors import SmolalignError

FIGURE_FORMATS = ("png", "pdf", "svg", "jpg", "jpeg")
"""What `save_figure` writes, by the file name's suffix (matplotlib's Agg formats a user asks for)."""


def write_atomically(path: Path, content: str | bytes) -> None:
    """`content` as the whole of `path`; a path that cannot be written (a folder there, a file where a folder
    should be, no permission, a full disk) is a SmolalignError naming it."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, staging = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise SmolalignError(f"{path}: cannot be written ({exc.strerror or exc})") from None
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(content.encode() if isinstance(content, str) else content)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(staging, created_mode())
        os.replace(staging, path)
    except BaseException as exc:
        if os.path.exists(staging):
            os.unlink(staging)
        if isinstance(exc, OSError):
            raise SmolalignError(f"{path}: cannot be written ({exc.strerror or exc})") from None
        raise
    _sync_folder(path.parent)


def check_writable(path: Path, what: str, formats: tuple[str, ...] | None = None) -> None:
    """Before the work that ends in writing `path` (an evaluation, a plot): refused now, naming `what`, when it
    could not be written then (a folder there, no folder to hold it, no permission, or, with `formats`, a suffix
    not among them)."""
    path = Path(path)
    if formats is not None and (path.suffix.lstrip(".").lower() or "png") not in formats:
        raise SmolalignError(f"{what} {path}: cannot write a {path.suffix} file; use one of "
                             f"{', '.join('.' + f for f in formats)}")
    if path.is_dir():
        raise SmolalignError(f"{what} {path}: is a folder; name a file")
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise SmolalignError(f"{what} {path}: {ancestor} is a file, not a folder")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise SmolalignError(f"{what} {path}: {ancestor} is not writable here")
    try:  # os.access says yes to root everywhere, and nothing of a read-only file system or /proc: try it
        with tempfile.NamedTemporaryFile(dir=ancestor, prefix=".smolalign-probe-"):
            pass
    except OSError as exc:
        raise SmolalignError(f"{what} {path}: {ancestor} is not writable here ({exc.strerror})") from None


def _umask() -> int:
    try:  # Linux states the umask; reading it elsewhere means setting it for a moment
        status = Path("/proc/self/status").read_text()
        return int(next(line.split()[1] for line in status.splitlines() if line.startswith("Umask:")), 8)
    except (OSError, StopIteration, ValueError):
        mask = os.umask(0o022)
        os.umask(mask)
        return mask


def created_mode() -> int:
    """The mode `open` gives a new file in this process: 0666 less the umask."""
    return 0o666 & ~_umask()


def readable_as_created(folder: Path) -> None:
    """Give `folder` and what is under it the modes a plain `open` and `mkdir` would have where they are private to
    their owner (a file 0600, as a temporary file renamed or safetensors writes it; a folder 0700, as `mkdtemp`
    makes it): a saved model that teammates can read."""
    mask = _umask()
    mode, folder_mode = 0o666 & ~mask, 0o777 & ~mask
    for path in [Path(folder), *Path(folder).rglob("*")]:
        if path.is_symlink():
            continue
        current = path.stat().st_mode & 0o777
        if path.is_file() and current == 0o600 and mode != 0o600:
            os.chmod(path, mode)
        elif path.is_dir() and current == 0o700 and folder_mode != 0o700:
            os.chmod(path, folder_mode)


def save_figure(figure, path: Path, dpi: int = 100) -> None:
    """A matplotlib figure, in the format its file name says (PNG without one), written atomically."""
    image = io.BytesIO()
    figure.savefig(image, dpi=dpi, format=Path(path).suffix.lstrip(".").lower() or "png")
    write_atomically(path, image.getvalue())


def _sync_folder(folder: Path) -> None:
    """The rename itself is durable only once the folder's entry is on disk."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass  # some filesystems (and every Windows one) refuse fsync on a directory
    finally:
        os.close(descriptor)
