"""Where the repository and the shared real fixtures (`../shared`, absent on a bare clone) are."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
