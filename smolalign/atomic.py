"""Files replaced whole or not at all: written to a temporary file in the same folder, flushed to disk, then renamed
over the target, so a reader (or a rerun after a kill -9 or a power loss) sees the old file or the complete new one,
never a torn one."""

import io
import os
import tempfile
from pathlib import Path


def write_atomically(path: Path, content: str | bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, staging = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(content.encode() if isinstance(content, str) else content)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(staging, path)
    except BaseException:
        if os.path.exists(staging):
            os.unlink(staging)
        raise
    _sync_folder(path.parent)


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
