"""The bad-input corpus for files that survive a run: damaged checkpoints of every kind `convert` reads (nanotron,
torch DCP, DeepSpeed ZeRO), run directories (a torn manifest, a non-empty folder, --resume over damaged
checkpoints) and `launch slurm` arguments. Each is refused with exit 2 and one line naming the file or flag, before
anything is written (harness: tests/badinput.py; checkpoint bytes: tests/checkpoint_bytes.py)."""

import importlib.util
import json
import pickle

import pytest
from badinput import Case, run_refused
from checkpoint_bytes import raw_safetensors, safetensors, torch_archive, trainer_checkpoint

# --- nanotron -------------------------------------------------------------------------------------------------------

_LLAMA = {"is_llama_config": True, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 512, "rope_theta": 10000.0,
          "tie_word_embeddings": True}
_EMBEDDING = "ck/model/model/token_position_embeddings/pp_block/token_embedding/model_weight.safetensors"
_NORM = "ck/model/model/final_layer_norm/pp_block/model_weight.safetensors"
_SHARD = "ck/model/model/decoder/0/pp_block/attn/o_proj/model_weight_pp-rank-0-of-1_tp-rank-{}-of-2.safetensors"


def _nanotron(**replace) -> dict:
    """A nanotron step folder at ck/ (metadata, config, two weights); `replace` swaps files (None removes one)."""
    files = {"ck/checkpoint_metadata.json": json.dumps({"version": "1.4", "tp": 1, "dp": 1}),
             "ck/model_config.json": json.dumps(_LLAMA),
             _EMBEDDING: safetensors({"data": ("F32", [512, 64])}),
             _NORM: safetensors({"data": ("F32", [64])})}
    for name, content in replace.items():
        key = {"meta": "ck/checkpoint_metadata.json", "config": "ck/model_config.json", "embedding": _EMBEDDING,
               "norm": _NORM}.get(name, name)
        if content is None:
            files.pop(key)
        else:
            files[key] = content
    return files


def _shard_metadata(**overrides) -> dict:
    meta = {"version": "1.4", "unsharded_shape": "(64, 64)",
            "local_global_slices_pairs": "0,32,1|None,None,None#0,32,1|None,None,None"}
    return {**meta, **overrides}


def _convert(case_id: str, culprit: tuple[str, ...], files: dict, *extra: str) -> Case:
    return Case(case_id, ("convert", "{dir}/ck", "{dir}/out", *extra), culprit, files)


_FULL = safetensors({"data": ("F32", [64])})
NANOTRON = [
    _convert("nanotron-metadata-not-json", ("checkpoint_metadata.json", "not valid JSON"),
             _nanotron(meta='{"version": "1.4", "tp": ')),
    _convert("nanotron-metadata-a-list", ("checkpoint_metadata.json", "expected a JSON object"), _nanotron(meta="[1, 2]")),
    _convert("nanotron-metadata-binary", ("checkpoint_metadata.json", "not a UTF-8"),
             _nanotron(meta=b"\xff\xfe\x00garbage\x9c")),
    _convert("nanotron-metadata-tp-not-int", ("checkpoint_metadata.json", "tp must be a positive integer"),
             _nanotron(meta='{"version": "1.4", "tp": "two"}')),
    _convert("nanotron-metadata-tp-zero", ("checkpoint_metadata.json", "tp must be a positive integer"),
             _nanotron(meta='{"version": "1.4", "tp": 0}')),
    _convert("nanotron-version-unreadable", ("unreadable version", "checkpoint_metadata.json"),
             _nanotron(meta='{"version": "one.two", "tp": 1}')),
    _convert("nanotron-version-too-old", ("older than 1.2",), _nanotron(meta='{"version": "1.0", "tp": 1}')),
    _convert("nanotron-config-not-json", ("model_config.json", "not valid JSON"), _nanotron(config="{'hidden_size': 64")),
    _convert("nanotron-config-binary", ("model_config.json", "not a UTF-8"), _nanotron(config=b"\x00\xc3\x28\xa0\xa1")),
    _convert("nanotron-config-a-string", ("model_config.json", "expected a JSON object"), _nanotron(config='"llama"')),
    _convert("nanotron-config-missing-hidden-size", ("model_config.json", "hidden_size must be a positive integer"),
             _nanotron(config=json.dumps({k: v for k, v in _LLAMA.items() if k != "hidden_size"}))),
    _convert("nanotron-config-layers-a-string", ("model_config.json", "num_hidden_layers"),
             _nanotron(config=json.dumps({**_LLAMA, "num_hidden_layers": "2"}))),
    _convert("nanotron-config-heads-do-not-divide", ("model_config.json", "not a multiple of num_attention_heads"),
             _nanotron(config=json.dumps({**_LLAMA, "num_attention_heads": 5}))),
    _convert("nanotron-config-kv-heads-negative", ("model_config.json", "num_key_value_heads"),
             _nanotron(config=json.dumps({**_LLAMA, "num_key_value_heads": -1}))),
    _convert("nanotron-config-unknown-architecture", ("neither a Llama",),
             _nanotron(config=json.dumps({k: v for k, v in _LLAMA.items() if k != "is_llama_config"}))),
    _convert("nanotron-config-sliding-window", ("sliding_window_size",),
             _nanotron(config=json.dumps({**_LLAMA, "sliding_window_size": 4096}))),
    _convert("nanotron-config-moe", ("moe_config",), _nanotron(config=json.dumps({**_LLAMA, "moe_config": {"n": 8}}))),
    _convert("nanotron-no-config", ("neither config.yaml",), _nanotron(config=None)),
    _convert("nanotron-config-yaml-broken", ("config.yaml", "not valid YAML"),
             {**_nanotron(config=None), "ck/config.yaml": "model: {model_config: [\n"}),
    _convert("nanotron-config-yaml-binary", ("config.yaml", "not a UTF-8"),
             {**_nanotron(config=None), "ck/config.yaml": b"model:\n  \xff\xfe: 1\n"}),
    _convert("nanotron-config-yaml-a-list", ("neither config.yaml",),
             {**_nanotron(config=None), "ck/config.yaml": "- model\n- data\n"}),
    _convert("nanotron-shard-three-bytes", ("model_weight.safetensors", "too short"), _nanotron(norm=b"abc")),
    _convert("nanotron-shard-empty", ("model_weight.safetensors", "too short"), _nanotron(norm=b"")),
    _convert("nanotron-header-longer-than-file", ("model_weight.safetensors", "header claims"),
             _nanotron(norm=_FULL[:40])),
    _convert("nanotron-header-huge-length", ("model_weight.safetensors", "header claims"),
             _nanotron(norm=(2**63).to_bytes(8, "little") + b"{}")),
    _convert("nanotron-header-not-json", ("model_weight.safetensors", "header is not valid JSON"),
             _nanotron(norm=raw_safetensors(b"{data: F32}"))),
    _convert("nanotron-header-binary", ("model_weight.safetensors", "header is not valid JSON"),
             _nanotron(norm=raw_safetensors(b"\xff\xfe\xfd\xfc"))),
    _convert("nanotron-header-a-list", ("model_weight.safetensors", "not a JSON object"),
             _nanotron(norm=raw_safetensors([1, 2, 3]))),
    _convert("nanotron-header-dtype-not-a-name", ("model_weight.safetensors", "unknown dtype"),
             _nanotron(norm=raw_safetensors({"data": {"dtype": 7, "shape": [64], "data_offsets": [0, 256]}},
                                            bytes(256)))),
    _convert("nanotron-header-unknown-dtype", ("final_layer_norm", "dtypes ['F42']"),
             _nanotron(norm=raw_safetensors({"data": {"dtype": "F42", "shape": [64], "data_offsets": [0, 256]}},
                                            bytes(256)))),
    _convert("nanotron-header-negative-shape", ("model_weight.safetensors", "malformed shape"),
             _nanotron(norm=raw_safetensors({"data": {"dtype": "F32", "shape": [-64], "data_offsets": [0, 256]}},
                                            bytes(256)))),
    _convert("nanotron-header-offsets-reversed", ("model_weight.safetensors", "malformed data_offsets"),
             _nanotron(norm=raw_safetensors({"data": {"dtype": "F32", "shape": [64], "data_offsets": [256, 0]}},
                                            bytes(256)))),
    _convert("nanotron-header-size-mismatch", ("model_weight.safetensors", "needs 256"),
             _nanotron(norm=raw_safetensors({"data": {"dtype": "F32", "shape": [64], "data_offsets": [0, 128]}},
                                            bytes(128)))),
    _convert("nanotron-truncated-weights", ("model_weight.safetensors", "truncated"), _nanotron(norm=_FULL[:-100])),
    _convert("nanotron-truncated-embedding", ("token_embedding/model_weight.safetensors", "truncated"),
             _nanotron(embedding=safetensors({"data": ("F32", [512, 64])})[:5000])),
    _convert("nanotron-shard-wrong-tensor-name", ("model_weight.safetensors", "named 'data'"),
             _nanotron(norm=safetensors({"weight": ("F32", [64])}))),
    _convert("nanotron-metadata-values-not-strings", ("model_weight.safetensors", "__metadata__"),
             _nanotron(norm=safetensors({"data": ("F32", [64])}, metadata={"version": 1.4}))),
    _convert("nanotron-unexpected-file", ("unexpected weight file", "weights.safetensors"),
             {**_nanotron(), "ck/model/model/weights.safetensors": _FULL}),
    _convert("nanotron-no-weight-files", ("no weight files under model/",),
             {**_nanotron(embedding=None, norm=None), "ck/model/README": "empty"}),
    _convert("nanotron-no-embedding", ("no token embedding",), _nanotron(embedding=None)),
    _convert("nanotron-missing-tp-rank", ("tp-rank-1-of-2", "missing tensor-parallel rank"),
             {**_nanotron(), _SHARD.format(0): safetensors({"data": ("F32", [32, 64])}, _shard_metadata())}),
    _convert("nanotron-shard-without-slice-metadata", ("carries no slice metadata",),
             {**_nanotron(), **{_SHARD.format(r): safetensors({"data": ("F32", [32, 64])}) for r in (0, 1)}}),
    _convert("nanotron-shard-slice-metadata-garbage", ("tp-rank-0-of-2.safetensors", "slice metadata"),
             {**_nanotron(), **{_SHARD.format(r): safetensors({"data": ("F32", [32, 64])}, _shard_metadata(
                 local_global_slices_pairs="garbage")) for r in (0, 1)}}),
    _convert("nanotron-shard-shape-garbage", ("tp-rank-0-of-2.safetensors", "slice metadata"),
             {**_nanotron(), **{_SHARD.format(r): safetensors({"data": ("F32", [32, 64])}, _shard_metadata(
                 unsharded_shape="(sixty-four, 64)")) for r in (0, 1)}}),
    _convert("nanotron-shard-slice-step-zero", ("tp-rank-0-of-2.safetensors", "does not fit its shape"),
             {**_nanotron(), **{_SHARD.format(r): safetensors({"data": ("F32", [32, 64])}, _shard_metadata(
                 local_global_slices_pairs="0,32,0|None,None,None#0,32,1|None,None,None")) for r in (0, 1)}}),
    _convert("nanotron-shards-overlap", ("cover", "with overlaps"),
             {**_nanotron(), **{_SHARD.format(r): safetensors({"data": ("F32", [32, 64])}, _shard_metadata())
                                for r in (0, 1)}}),
    Case("nanotron-latest-binary", ("convert", "{dir}/run", "{dir}/out"), ("latest.txt", "not a UTF-8"),
         {"run/latest.txt": b"\xff\xfe1\x000\x00", **{k.replace("ck/", "run/10/"): v for k, v in _nanotron().items()}}),
    Case("nanotron-latest-missing-step", ("convert", "{dir}/run", "{dir}/out"), ("latest.txt names step '20'",),
         {"run/latest.txt": "20\n", **{k.replace("ck/", "run/10/"): v for k, v in _nanotron().items()}}),
    Case("nanotron-latest-escapes", ("convert", "{dir}/run", "{dir}/out"), ("latest.txt names step",),
         {"run/latest.txt": "../../etc\n", **{k.replace("ck/", "run/10/"): v for k, v in _nanotron().items()}}),
]

# --- convert, whatever the format -------------------------------------------------------------------------------------

CONVERT = [
    Case("convert-no-source", ("convert", "{dir}/missing", "{dir}/out"), ("{dir}/missing", "no such directory")),
    Case("convert-empty-source", ("convert", "{dir}/ck", "{dir}/out"), ("{dir}/ck", "it holds .keep"),
         {"ck/.keep": ""}),
    Case("convert-unknown-format", ("convert", "{dir}/ck", "{dir}/out"), ("not a format smolalign reads",),
         {"ck/weights.npz": b"PK\x03\x04"}),
    Case("convert-hf-directory", ("convert", "{dir}/ck", "{dir}/out"), ("already a transformers directory",),
         {"ck/config.json": "{}", "ck/model.safetensors": _FULL}),
    Case("convert-megatron", ("convert", "{dir}/ck", "{dir}/out"), ("Megatron",),
         {"ck/latest_checkpointed_iteration.txt": "100"}),
    _convert("convert-bad-dtype", ("--dtype", "int8"), _nanotron(), "--dtype", "int8"),
    _convert("convert-destination-not-empty", ("{dir}/out", "--overwrite"), {**_nanotron(), "out/keep.txt": "mine"}),
    _convert("convert-destination-a-file", ("{dir}/out",), {**_nanotron(), "out": "a file"}),
    _convert("convert-tokenizer-not-a-tokenizer", ("tokenizer", "{dir}/tok"), {**_nanotron(), "tok/notes.txt": ""},
             "--tokenizer", "{dir}/tok"),
]

# --- torch DCP: `.metadata` is a pickle of torch's Metadata --------------------------------------------------------


class _Evil:
    def __reduce__(self):
        import os

        return os.system, ("echo pwned",)


def _dcp(metadata: bytes, config: bool = True) -> tuple[dict, tuple[str, ...]]:
    """(files, extra arguments) of a DCP folder with this `.metadata` and one .distcp file."""
    return {"ck/.metadata": metadata, "ck/__0_0.distcp": b"\0" * 64}, ("--config", "{tiny}") if config else ()


def _dcp_case(case_id: str, culprit: tuple[str, ...], metadata: bytes, config: bool = True) -> Case:
    files, extra = _dcp(metadata, config=config)
    return _convert(case_id, culprit, files, *extra)


DCP = [
    _dcp_case("dcp-metadata-garbage", (".metadata", "not torch DCP metadata"), b"\x13\x37 not a pickle at all"),
    _dcp_case("dcp-metadata-empty", (".metadata", "not torch DCP metadata"), b""),
    _dcp_case("dcp-metadata-text", (".metadata", "not torch DCP metadata"), b"{\"state_dict_metadata\": {}}"),
    _dcp_case("dcp-metadata-a-dict", (".metadata", "it holds a dict"), pickle.dumps({"a": 1})),
    _dcp_case("dcp-metadata-a-list", (".metadata", "it holds a list"), pickle.dumps([1, 2, 3])),
    _dcp_case("dcp-metadata-runs-code", (".metadata", "never holds"),
              pickle.dumps(_Evil())),
    _dcp_case("dcp-metadata-truncated-pickle", (".metadata", "not torch DCP metadata"), pickle.dumps({"a": 1})[:-3]),
    _dcp_case("dcp-no-config", ("carries no model config", "--config"), b"irrelevant", config=False),
    _convert("dcp-config-missing", ("--config", "no config.json"), _dcp(b"x")[0], "--config", "{dir}/nothere"),
]

# --- DeepSpeed ZeRO -------------------------------------------------------------------------------------------------

_STATES = "ck/global_step3/zero_pp_rank_0_mp_rank_00_model_states.pt"
_OPTIM = "ck/global_step3/bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt"


def _deepspeed(**replace) -> dict:
    files = {"ck/latest": "global_step3", _STATES: torch_archive(), _OPTIM: torch_archive()}
    files.update({{"states": _STATES, "optim": _OPTIM, "latest": "ck/latest"}[k]: v for k, v in replace.items()})
    return files


_NO_DEEPSPEED = importlib.util.find_spec("deepspeed") is None
def _ds(case_id: str, culprit: tuple[str, ...], **replace) -> Case:
    return _convert(case_id, culprit, _deepspeed(**replace), "--config", "{tiny}")


DEEPSPEED = [
    _ds("deepspeed-latest-names-nothing", ("`latest` names 'global_step9'",), latest="global_step9"),
    _ds("deepspeed-latest-binary", ("latest", "not a UTF-8"), latest=b"\xff\xfeglobal_step3"),
    _ds("deepspeed-latest-escapes", ("`latest` names '../../x'",), latest="../../x"),
    _ds("deepspeed-states-garbage", ("model_states.pt", "not a torch.save archive"), states=b"this is not torch"),
    _ds("deepspeed-states-truncated", ("model_states.pt", "zip directory is unreadable"), states=torch_archive()[:200]),
    _ds("deepspeed-optim-truncated", ("optim_states.pt", "zip directory is unreadable"), optim=torch_archive()[:-30]),
    _ds("deepspeed-states-empty", ("model_states.pt", "not a torch.save archive"), states=b""),
]

# --- run directories ------------------------------------------------------------------------------------------------

_CHAT = json.dumps({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}) + "\n"
_RECIPE = json.dumps({"model": {"source": "{tiny}"}, "template": {"name": "smollm3"},
                      "data": {"sources": [{"path": "{dir}/chat.jsonl"}]},
                      "train": {"max_length": 1024, "max_steps": 1, "per_device_train_batch_size": 1}})


def _run(case_id: str, culprit: tuple[str, ...], files: dict, *flags: str) -> Case:
    return Case(case_id, ("sft", "{dir}/r.yaml", "--output-dir", "{dir}/run", *flags), culprit,
                {"r.yaml": _RECIPE, "chat.jsonl": _CHAT, **files})


def _checkpoint(step: int, **replace) -> dict:
    files = {k: v for k, v in trainer_checkpoint(step, "run/").items()}
    for name, content in replace.items():
        key = f"run/checkpoint-{step}/{name.replace('__', '.')}"
        if content is None:
            files.pop(key)
        else:
            files[key] = content
    return files


_MANIFEST = json.dumps({"created": "2026-01-01", "stage": "sft"})
_WEIGHTS = trainer_checkpoint(1)["checkpoint-1/model.safetensors"]
RUN_DIRS = [
    _run("rundir-not-empty", ("{dir}/run", "not empty"), {"run/notes.txt": "mine"}),
    _run("rundir-a-file", ("{dir}/run", "is a file"), {"run": "a file"}),
    _run("rundir-resume-and-overwrite", ("--resume and --overwrite",), {}, "--resume", "--overwrite"),
    _run("rundir-torn-manifest", ("manifest.json", "not valid JSON"), {"run/manifest.json": _MANIFEST[:17]}, "--resume"),
    _run("rundir-binary-manifest", ("manifest.json", "not a UTF-8"), {"run/manifest.json": b"\xff\x00\xfe"}, "--resume"),
    _run("rundir-manifest-a-list", ("manifest.json", "expected a JSON object"), {"run/manifest.json": "[]"}, "--resume"),
    _run("rundir-empty-manifest", ("manifest.json", "not valid JSON"), {"run/manifest.json": ""}, "--resume"),
    _run("rundir-finished-no-checkpoint", ("holds a finished model",), {"run/model/config.json": "{}"}, "--resume"),
    _run("rundir-resume-save-cut-off", ("checkpoint-4", "no trainer_state.json"),
         _checkpoint(4, trainer_state__json=None), "--resume"),
    _run("rundir-resume-truncated-weights", ("checkpoint-4", "model.safetensors", "truncated"),
         _checkpoint(4, model__safetensors=_WEIGHTS[:-40]), "--resume"),
    _run("rundir-resume-weights-three-bytes", ("checkpoint-4", "model.safetensors", "too short"),
         _checkpoint(4, model__safetensors=b"abc"), "--resume"),
    _run("rundir-resume-no-weights", ("checkpoint-4", "no model weights"),
         _checkpoint(4, model__safetensors=None), "--resume"),
    _run("rundir-resume-state-not-json", ("checkpoint-4", "trainer_state.json", "not valid JSON"),
         _checkpoint(4, trainer_state__json=b'{"global_step": 4, "log'), "--resume"),
    _run("rundir-resume-state-without-step", ("checkpoint-4", "global_step"),
         _checkpoint(4, trainer_state__json=b'{"log_history": []}'), "--resume"),
    _run("rundir-resume-optimizer-truncated", ("checkpoint-4", "optimizer.pt"),
         _checkpoint(4, optimizer__pt=torch_archive()[:300]), "--resume"),
    _run("rundir-resume-rng-garbage", ("checkpoint-4", "rng_state.pth", "not a torch.save archive"),
         _checkpoint(4, rng_state__pth=b"garbage"), "--resume"),
    _run("rundir-resume-index-missing-shard", ("checkpoint-4", "model-00002-of-00002.safetensors", "missing"),
         _checkpoint(4, model__safetensors=None, **{
             "model-00001-of-00002__safetensors": _WEIGHTS,
             "model__safetensors__index__json": json.dumps({"weight_map": {
                 "a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}).encode()}),
         "--resume"),
    _run("rundir-resume-deepspeed-latest-dangling", ("checkpoint-4", "global_step4"),
         _checkpoint(4, model__safetensors=None, latest=b"global_step4"), "--resume"),
    _run("rundir-resume-every-checkpoint-damaged", ("checkpoint-8", "checkpoint-4"),
         {**_checkpoint(4, model__safetensors=b""), **_checkpoint(8, trainer_state__json=None)}, "--resume"),
]

# --- launch slurm ---------------------------------------------------------------------------------------------------


def _slurm(case_id: str, culprit: tuple[str, ...], *flags: str, files: dict | None = None) -> Case:
    return Case(case_id, ("launch", "slurm", "quickstart/sft", "--script", "{dir}/job.sbatch", *flags), culprit,
                files or {})


LAUNCH = [
    _slurm("slurm-nodes-zero", ("--nodes",), "--nodes", "0"),
    _slurm("slurm-nodes-negative", ("--nodes",), "--nodes", "-2"),
    _slurm("slurm-gpus-zero", ("--gpus-per-node",), "--nodes", "1", "--gpus-per-node", "0"),
    _slurm("slurm-time-words", ("--time 'two days'",), "--nodes", "1", "--time", "two days"),
    _slurm("slurm-time-dangling-day", ("--time '1-'",), "--nodes", "1", "--time", "1-"),
    _slurm("slurm-time-shorter-than-signal", ("--time 00:01:00", "--signal-before"), "--nodes", "1", "--time",
           "00:01:00"),
    _slurm("slurm-signal-before-negative", ("--signal-before",), "--nodes", "1", "--signal-before", "-5"),
    _slurm("slurm-port-out-of-range", ("--main-process-port",), "--nodes", "1", "--main-process-port", "70000"),
    _slurm("slurm-vllm-nodes-two", ("--vllm-nodes 2",), "--nodes", "1", "--vllm-nodes", "2"),
    _slurm("slurm-unknown-preset", ("--preset nope",), "--nodes", "1", "--preset", "nope"),
    _slurm("slurm-job-name-with-space", ("--job-name 'my job'",), "--nodes", "1", "--job-name", "my job"),
    _slurm("slurm-sbatch-without-key", ("--sbatch '=x'",), "--nodes", "1", "--sbatch", "=x"),
    Case("slurm-resume-over-damaged-checkpoints", ("launch", "slurm", "{dir}/r.yaml", "--nodes", "1", "--script",
                                                   "{dir}/job.sbatch", "--output-dir", "{dir}/run"),
         ("checkpoint-2", "model.safetensors"),
         {"r.yaml": _RECIPE, "chat.jsonl": _CHAT, **_checkpoint(2, model__safetensors=b"\x00" * 7)}),
]

CASES = NANOTRON + CONVERT + DCP + RUN_DIRS + LAUNCH
_SKIP_DEEPSPEED = pytest.mark.skipif(_NO_DEEPSPEED, reason="the DeepSpeed reader needs deepspeed installed")


@pytest.mark.parametrize("case", CASES + [pytest.param(c, marks=_SKIP_DEEPSPEED) for c in DEEPSPEED],
                         ids=lambda c: c.id)
def test_refused(case, cli, tmp_path, tiny_dir, monkeypatch):
    run_refused(case, cli, tmp_path / "case", tiny_dir, monkeypatch)


def test_the_corpus_is_large_and_its_ids_unique():
    ids = [c.id for c in CASES + DEEPSPEED]
    assert len(ids) == len(set(ids)) and len(ids) >= 70


@pytest.fixture(scope="module")
def dcp_folder(tmp_path_factory):
    """A real DCP folder written by torch (two tensors in one .distcp file)."""
    import warnings

    import torch
    from torch.distributed.checkpoint import FileSystemWriter, save

    folder = tmp_path_factory.mktemp("dcp")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        save({"a": torch.ones(16, 8), "b": torch.zeros(32)}, storage_writer=FileSystemWriter(str(folder)), no_dist=True)
    return folder


@pytest.mark.parametrize("damage, culprit", [
    ("metadata-cut", (".metadata", "not torch DCP metadata")),
    ("distcp-cut", ("__0_0.distcp", "the file has")),
    ("distcp-renamed", ("__0_0.distcp is missing",)),
])
def test_damaged_real_dcp_is_refused(damage, culprit, dcp_folder, cli, tmp_path, tiny_dir, monkeypatch):
    metadata, distcp = (dcp_folder / ".metadata").read_bytes(), (dcp_folder / "__0_0.distcp").read_bytes()
    files = {"ck/.metadata": metadata[: len(metadata) // 2] if damage == "metadata-cut" else metadata,
             "ck/__0_0.distcp" if damage != "distcp-renamed" else "ck/__1_0.distcp":
                 distcp[:-100] if damage == "distcp-cut" else distcp}
    run_refused(_convert(f"dcp-{damage}", culprit, files, "--config", "{tiny}"), cli, tmp_path / "case", tiny_dir,
                monkeypatch)
