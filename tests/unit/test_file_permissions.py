"""What smolalign writes is readable as the process's umask says, like a file `open` creates: a temporary file renamed
into place is private to its owner (0600), and so are the weights safetensors 0.8 saves, which on a shared cluster
would leave a run's model, card and plots unreadable to the team. The expectations come from `open` itself."""

import os
from pathlib import Path

from smolalign.atomic import readable_as_created, write_atomically


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777  # the permission bits (umask: tests/conftest.py)


def test_a_file_written_atomically_has_the_mode_open_gives(tmp_path, umask):
    with open(tmp_path / "plain.txt", "w") as stream:
        stream.write("x")
    write_atomically(tmp_path / "atomic.txt", "x")
    assert mode(tmp_path / "atomic.txt") == mode(tmp_path / "plain.txt")


def test_only_owner_private_files_are_opened_up(tmp_path, umask):
    for name, permissions in (("private", 0o600), ("read-only", 0o444), ("script", 0o755)):
        (tmp_path / name).write_text("x")
        os.chmod(tmp_path / name, permissions)
    (tmp_path / "staging").mkdir(mode=0o700)
    (tmp_path / "shared").mkdir(mode=0o750)
    os.chmod(tmp_path / "shared", 0o750)  # mkdir's mode goes through the umask
    readable_as_created(tmp_path)
    assert mode(tmp_path / "private") == 0o666 & ~umask
    assert mode(tmp_path / "staging") == 0o777 & ~umask
    assert (mode(tmp_path / "read-only"), mode(tmp_path / "script"), mode(tmp_path / "shared")) == (0o444, 0o755, 0o750)

