"""A run with a `hub:` section pushes its final model/ with its model card (naming the repository). The hub is
stood in for at the HfApi boundary by a local folder: every call is checked against the real HfApi method's
signature, and does to the repository's files what the hub does (create, branch from main, commit a folder)."""

import hashlib
import inspect
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from huggingface_hub import HfApi
from tiny_models import chat_rows, write_jsonl

from smolalign.recipe.schema import HubSection
from smolalign.runs.hub import push_model


class LocalHub:
    def __init__(self, root: Path):
        self.root, self.private, self.commits = root, {}, []

    def _called(self, name: str, *args, **kwargs) -> None:
        inspect.signature(getattr(HfApi, name)).bind(self, *args, **kwargs)  # TypeError if HfApi takes no such call

    def branch(self, repo_id: str, revision: str | None) -> Path:
        return self.root / repo_id / (revision or "main")

    def create_repo(self, repo_id, **kwargs):
        self._called("create_repo", repo_id, **kwargs)
        if repo_id in self.private and not kwargs.get("exist_ok"):
            raise FileExistsError(repo_id)
        if repo_id not in self.private:
            self.private[repo_id] = kwargs.get("private")
            self.branch(repo_id, None).mkdir(parents=True)
        return f"https://hub.test/{repo_id}"

    def create_branch(self, repo_id, **kwargs):
        self._called("create_branch", repo_id, **kwargs)
        branch = self.branch(repo_id, kwargs["branch"])
        if not branch.exists():
            branch.mkdir()
            for path in self.branch(repo_id, None).rglob("*"):
                if path.is_file():
                    (branch / path.relative_to(self.branch(repo_id, None))).write_bytes(path.read_bytes())

    def upload_folder(self, **kwargs):
        self._called("upload_folder", **kwargs)
        branch = self.branch(kwargs["repo_id"], kwargs.get("revision"))
        assert branch.is_dir(), "the hub refuses a commit to a branch that does not exist"
        folder = Path(kwargs["folder_path"])
        for path in folder.rglob("*"):
            if path.is_file():
                target = branch / path.relative_to(folder)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(path.read_bytes())
        oid = hashlib.sha1(str(len(self.commits)).encode()).hexdigest()
        self.commits.append((kwargs["repo_id"], kwargs.get("revision"), kwargs.get("commit_message")))
        return SimpleNamespace(oid=oid, commit_url=f"https://hub.test/{kwargs['repo_id']}/commit/{oid}")


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def hub(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr("smolalign.hub_access._unreachable", lambda: None)  # the stand-in answers for the hub
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    local = LocalHub(tmp_path / "hub")
    monkeypatch.setattr("smolalign.runs.hub.hub_api", lambda: local)
    return local


def test_a_run_pushes_its_model_with_its_card(cli, hub, write_recipe, tiny_dir, tmp_path):
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(8))
    recipe = write_recipe({"model": {"source": str(tiny_dir)}, "template": {"name": "smollm3"},
                           "data": {"sources": [{"path": str(data)}]},
                           "train": {"max_length": 256, "per_device_train_batch_size": 2, "max_steps": 2,
                                     "logging_steps": 1, "gradient_checkpointing": False},
                           "hub": {"repo_id": "me/smol-sft", "private": False, "revision": "v1"}})
    run_dir = tmp_path / "run"
    code, _, err = cli("sft", recipe, "-o", run_dir)
    assert code == 0, err
    model_dir = run_dir / "model"
    pushed = files(hub.branch("me/smol-sft", "v1"))
    assert pushed == files(model_dir) and {"config.json", "tokenizer_config.json", "README.md"} <= set(pushed)
    assert hub.private == {"me/smol-sft": False} and files(hub.branch("me/smol-sft", None)) == {}
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["hub"] == {"repo_id": "me/smol-sft", "revision": "v1", "commit": hashlib.sha1(b"0").hexdigest(),
                               "url": f"https://hub.test/me/smol-sft/commit/{hashlib.sha1(b'0').hexdigest()}"}
    from huggingface_hub import ModelCard

    card = ModelCard(pushed["README.md"].decode())  # huggingface_hub's own parse of the metadata
    assert card.data.base_model == str(tiny_dir) and card.data.library_name == "transformers"
    assert {"smolalign", "sft"} <= set(card.data.tags) and card.data.datasets == [str(data)]
    assert (run_dir / "recipe.yaml").read_text().rstrip() in card.text
    assert 'model_id = "me/smol-sft"' in card.text  # the quick start loads the pushed repository
    assert "| optimizer steps | 2 |" in card.text

    # Pushed again to main with the defaults: the repository exists, keeps its visibility, main gets the files.
    push_model(run_dir, model_dir, HubSection("me/smol-sft"), api=hub)
    assert files(hub.branch("me/smol-sft", None)) == files(model_dir) and hub.private == {"me/smol-sft": False}
    assert [c[1] for c in hub.commits] == ["v1", None]
