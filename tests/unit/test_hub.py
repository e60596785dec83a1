"""The `hub:` section before a run: a repo id the hub accepts, a token, the hub reachable; and a push that fails
after training says the model is saved and how to push it."""

import dataclasses
import json

import pytest
from recipe_runs import run_of

from smolalign.errors import RunFailure, SmolalignError
from smolalign.preflight import preflight
from smolalign.recipe.schema import HubSection
from smolalign.runs.hub import push_model
from smolalign.target import Target

CPU = Target(0, "this machine")
RAW = {"model": {"source": "HuggingFaceTB/SmolLM3-3B"}, "data": {"sources": [{"path": "chat.jsonl"}]}}


@pytest.fixture
def online(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr("smolalign.hub_access._unreachable", lambda: None)  # the hub answers; nothing is asked
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    monkeypatch.setattr("huggingface_hub.constants.HF_TOKEN_PATH", str(tmp_path / "no-token"))
    return monkeypatch


@pytest.mark.parametrize(("repo_id", "message"), [("my-model", "write it as owner/name"),
                                                  ("me/bad--name", "hub: repo_id .me/bad--name.: Cannot have --"),
                                                  ("me/a b", "hub: repo_id")])
def test_a_repo_id_the_hub_would_refuse_is_refused_at_validation(online, repo_id, message):
    with pytest.raises(SmolalignError, match=message):
        run_of({**RAW, "hub": {"repo_id": repo_id}}, "sft", "test")


def test_a_push_needs_a_token_and_the_hub(online):
    run = run_of({**RAW, "hub": {"repo_id": "me/smol", "revision": "v1"}}, "sft", "test", target=CPU)
    assert run.recipe.hub == HubSection("me/smol", private=True, revision="v1")
    online.delenv("HF_TOKEN")
    with pytest.raises(SmolalignError, match=r"^hub.repo_id me/smol: no hub token \(set HF_TOKEN"):
        preflight(run)
    online.setenv("HF_TOKEN", "hf_test")
    online.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(SmolalignError, match="HF_HUB_OFFLINE is set"):
        preflight(run)
    with pytest.raises(SmolalignError, match="hub.private"):
        run_of({**RAW, "hub": {"repo_id": "me/smol", "private": "maybe"}}, "sft", "test")
    preflight(dataclasses.replace(run, recipe=dataclasses.replace(run.recipe, hub=None)))


class Unreachable:
    def create_repo(self, *args, **kwargs):
        raise ConnectionError("Max retries exceeded with url: /api/repos/create")


def test_a_failed_push_keeps_the_model_and_says_how_to_push_it(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "recipe.yaml").write_text("stage: sft\n")
    (tmp_path / "manifest.json").write_text(json.dumps({"stage": "sft", "model": {"source": "x"}}))
    with pytest.raises(RunFailure, match=r"the model is saved, push it with `hf upload me/smol .*model --revision v1`"):
        push_model(tmp_path, tmp_path / "model", HubSection("me/smol", revision="v1"), api=Unreachable())
    assert "hub" not in json.loads((tmp_path / "manifest.json").read_text())
