"""Where the repository is, for tests that read its files (recipes, fixtures, scripts)."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
