"""The rewards package works without smolalign: every module imports, and a reward scores, in a process where
`import smolalign` fails."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BLOCK = """
import importlib.abc, pkgutil, sys

class NoSmolalign(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "smolalign" or name.startswith("smolalign."):
            raise ImportError(f"{name} is blocked")
        return None

sys.meta_path.insert(0, NoSmolalign())
import rewards
names = sorted(m.name for m in pkgutil.iter_modules(rewards.__path__))
for name in names:
    importlib.import_module(f"rewards.{name}")
from rewards import resolve_reward
prompt = [{"role": "system", "content": "Answer briefly /no_think."}, {"role": "user", "content": "2 + 2?"}]
assert resolve_reward("think_format")(["4"], prompts=[prompt]) == [1.0]
assert not any(m == "smolalign" or m.startswith("smolalign.") for m in sys.modules)
print(" ".join(names))
"""


def test_every_rewards_module_imports_without_smolalign():
    result = subprocess.run([sys.executable, "-c", BLOCK], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert set(result.stdout.split()) >= {"code", "errors", "format", "length", "math", "registry", "sandbox", "text",
                                          "think_mode"}
