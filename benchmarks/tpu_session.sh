#!/usr/bin/env bash
# One session on a real TPU host (a TPU VM, or the `device` tool's one-chip v5e), from the repo root:
#   bash benchmarks/tpu_session.sh smoke attention:420 [paged] [train]   (STEP:SECONDS sets a step's limit;
#   STEP:SECONDS:seq_len=4096,seq_len=16384 runs only those cases: -k each)
# Each step runs `xlabench run` on the suite's tpu profile (JAX backend) under its own time limit, so a
# slow step leaves its finished rows and the next steps still run; every step's files land in $OUT
# (default /tmp/xlabench-tpu) as one tar per step, plus a log. Resuming a step that ran out of time:
# run it again (it passes --resume with the step's CSV when one exists under $OUT/results).
# Installs xlabench's parent-side packages into /tmp/site from the host's own index when they are
# missing (the device machine has JAX and libtpu, not pandas or rich); the machine's JAX stays first.
set -u
OUT=${OUT:-/tmp/xlabench-tpu}
STEP_S=${STEP_S:-480}  # each step's limit (the device tool allows 600 s a command)
mkdir -p "$OUT/results"
# FROM=path/results.tgz: an earlier call's files, so that its steps resume where they stopped
[ -n "${FROM:-}" ] && tar -C "$OUT" -xzf "$FROM"
export XLABENCH_CACHE_DIR=${XLABENCH_CACHE_DIR:-/tmp/xlabench-cache}
# ... and the tuning cache's winners it stored (a fresh machine starts with an empty cache)
if [ -d "$OUT/results/tune-cache" ]; then
  mkdir -p "$XLABENCH_CACHE_DIR/tune" && cp "$OUT/results/tune-cache/"*.json "$XLABENCH_CACHE_DIR/tune/" 2>/dev/null
fi
export PYTHONUNBUFFERED=1 COLUMNS=${COLUMNS:-160}
# The rows' git_sha: a device machine gets the working tree, not its history (its git names the session's
# first commit). Pass the commit the tree is: XLABENCH_GIT_SHA=$(git rev-parse --short=10 HEAD) bash ...
[ -n "${XLABENCH_GIT_SHA:-}" ] || echo "note: XLABENCH_GIT_SHA is not set: the rows' git_sha is what this copy's git says"
export JAX_PLATFORMS=${JAX_PLATFORMS:-tpu,cpu}
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD"
if ! python3 -c 'import click, yaml, pydantic, rich, pandas, matplotlib, optax, threadpoolctl' 2>/dev/null; then
  t0=$(date +%s)
  PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --only-binary=:all: --no-compile \
    --index-url "${XLABENCH_PIP_INDEX:-file:///opt/pypi/simple}" --target /tmp/site \
    click pyyaml pydantic rich pandas matplotlib optax threadpoolctl >"$OUT/pip.log" 2>&1 \
    || { echo "pip install failed:"; tail -20 "$OUT/pip.log"; exit 1; }
  echo "installed the parent's packages in $(( $(date +%s) - t0 )) s"
  export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
# TorchTPU's environment (its rows are skipped without it): from the bundle carried in TORCH_TPU_BUNDLE
# (default .ttpu), with libtpu's version shim on this host (benchmarks/torch_tpu_env.sh)
BUNDLE=${TORCH_TPU_BUNDLE:-.ttpu} LIBTPU_VERSION_SHIM=${LIBTPU_VERSION_SHIM:-1} source benchmarks/torch_tpu_env.sh
# at exit, whatever happened: every step's files in one tar (the device tool brings back few files)
# (and the tuning cache's winners: small JSON files, one per tuned case)
# A tar over 15 MiB (kept traces: --explain) is split into results.tgz.00, .01, ... (the tool brings back
# files of at most 16 MiB): `cat results.tgz.* > results.tgz` joins them.
trap 'mkdir -p "$OUT/results/tune-cache"; cp "$XLABENCH_CACHE_DIR"/tune/*.json "$OUT/results/tune-cache/" 2>/dev/null; tar -C "$OUT" -czf "$OUT/results.tgz" results && rm -rf "$OUT/results" && echo "results: $OUT/results.tgz ($(du -h "$OUT/results.tgz" | cut -f1))"; if [ "$(stat -c %s "$OUT/results.tgz")" -gt 15728640 ]; then split -b 15M -d "$OUT/results.tgz" "$OUT/results.tgz." && rm "$OUT/results.tgz" && ls "$OUT"/results.tgz.*; fi' EXIT
xb() { python3 -m xlabench "$@"; }

run_in() {  # run_in NAME SUITE LIMIT [xlabench run options...]: resumed with the step's CSV where an earlier
  # call left one
  local name=$1 suite=$2 limit=$3; shift 3
  local resume=() prev
  prev=$(ls "$OUT/results/$name"/*/*.csv 2>/dev/null | grep -v -e '\.samples\.csv$' -e '\.compile\.csv$' | tail -1)
  [ -n "$prev" ] && resume=(--resume "$prev")
  echo "=== $name: xlabench run $suite $* --out ... ${resume[*]} (limit ${limit} s)"
  local t0=$(date +%s)
  # RUN_ARGS: more `xlabench run` options for every step (e.g. --explain)
  timeout --signal=INT --kill-after=20 "$limit" python3 -m xlabench run "$suite" "$@" ${RUN_ARGS:-} \
    --out "$OUT/results/$name" "${resume[@]}" 2>&1 | tee -a "$OUT/$name.log"
  echo "=== $name: exit ${PIPESTATUS[0]} after $(( $(date +%s) - t0 )) s"
}

run_step() {  # run_step NAME SUITE LIMIT [xlabench run options...]: the JAX side of a suite
  local name=$1 suite=$2 limit=${3:-$STEP_S}; shift 3
  run_in "$name" "$suite" "$limit" --backend jax "$@"
}

run_user() {  # run_user NAME SUITE LIMIT: a shipped suite as a new user runs it (no flags but --out): issue
  # 48/49's "done when"
  run_in "$1" "$2" "$3"
}

for arg in "$@"; do
  # STEP[:SECONDS[:KEY=VALUE,...]]: the third field filters the step's cases (-k KEY=VALUE each)
  IFS=: read -r step limit filters <<<"$arg"
  limit=${limit:-$STEP_S}
  k=()
  IFS=, read -ra kv <<<"${filters:-}"
  for f in "${kv[@]}"; do [ -n "$f" ] && k+=(-k "$f"); done
  case $step in
    smoke)  # the platform, the peaks, and three tuned cases: is the pipeline right on this chip?
      xb info --peaks 2>&1 | tee "$OUT/info.log"
      run_step smoke suites/attention.yaml "$limit" -k seq_len=4096 -k mode=fwd -k causal=false ;;
    attention) run_step attention suites/attention.yaml "$limit" "${k[@]}" ;;  # tuned (the default on a TPU)
    attention-cached)  # one S again (CACHED_S, default 4096): every tuned case from the cache; then the same
      # cases untuned, for what the cache costs against a run that does not tune
      run_step attention-cached suites/attention.yaml "$limit" -k seq_len=${CACHED_S:-4096}
      run_step attention-notune suites/attention.yaml "$limit" -k seq_len=${CACHED_S:-4096} --no-tune ;;
    attention-default)  # the default-block column: every case at 128 x 128 (--no-tune)
      run_step attention-default suites/attention.yaml "$limit" --no-tune ;;
    paged)  # one page size (64, 8 pages per 512-token block) and batch 16: contexts 1k..32k, three impls
      run_step paged suites/paged_attention.yaml "$limit" --profile tpu_full -k page_size=64 -k batch=16 "${k[@]}" ;;
    train)  # the model suites' shapes are for 4 devices: one chip takes a GPT-2 124M step
      run_step train benchmarks/tpu/gpt2_one_chip.yaml "$limit" ;;
    train-explain)  # issue 41: where a GPT-2 step's time goes (run --explain keeps each case's trace and HLO)
      run_step train-explain benchmarks/tpu/train_explain_v5e.yaml "$limit" --explain "${k[@]}" ;;
    train-final)  # issue 41: GPT-2 124M at batch 22 after the step's changes, explained
      run_step train-final benchmarks/tpu/train_final_v5e.yaml "$limit" --explain "${k[@]}" ;;
    train-auto)  # issue 41: global_batch auto on the chip (the probes' GiB by batch in the row's notes)
      run_step train-auto benchmarks/tpu/train_auto_v5e.yaml "$limit" "${k[@]}" ;;
    mfu-batch)  # issue 41: the seed's chart, MFU against global batch, GPT-2 355M naive vs splash
      run_step mfu-batch benchmarks/tpu/mfu_vs_batch_v5e.yaml "$limit" "${k[@]}" ;;
    gpt2|llama) run_user "$step" "suites/$step.yaml" "$limit" ;;  # the shipped suites, no flags
    attention-user) run_user "$step" suites/attention.yaml "$limit" ;;
    paged-user) run_user "$step" suites/paged_attention.yaml "$limit" ;;
    user-*)  # user-SUITE: a shipped suite, every backend, as a user runs it (filters: KEY=VALUE,...)
      run_in "$step" "suites/${step#user-}.yaml" "$limit" "${k[@]}" ;;
    torch-tpu-train)  # GPT-2 355M on TorchTPU, splash, two batches (benchmarks/tpu/torch_tpu_train_v5e.yaml);
      # TRAIN_YAML=NAME runs benchmarks/tpu/NAME.yaml instead (torch_tpu_train_124m_v5e, jax_train_124m_v5e)
      run_in "$step" "benchmarks/tpu/${TRAIN_YAML:-torch_tpu_train_v5e}.yaml" "$limit" "${k[@]}" ;;
    torch-tpu-explain)  # the torch_tpu train step (TRAIN_YAML, default torch_tpu_train_124m_v5e) with what explains it
      # (--explain): each case's profiler trace and its compiled programs' HLO text (the torch_tpu worker dumps them:
      # run/envs.py), then `xlabench explain` on the run; all of it in the step's tar
      RUN_ARGS="${RUN_ARGS:-} --explain" run_in "$step" "benchmarks/tpu/${TRAIN_YAML:-torch_tpu_train_124m_v5e}.yaml" \
        "$limit" "${k[@]}"
      for csv in "$OUT/results/$step"/*/*.csv; do
        case $csv in *.samples.csv|*.compile.csv) ;; *) xb explain "$csv" 2>&1 | tee -a "$OUT/$step.log" ;; esac
      done ;;
    torch-tpu-info) xb info --backend torch_tpu 2>&1 | tee "$OUT/info-torch-tpu.log" ;;
    torch-tpu-probe)  # how TorchTPU compiles the torch train step, three ways (benchmarks/tpu/torch_tpu_train_probe.py):
      # PROBES="variant:impl:batch[:model[:opt]] ..." (default below), each in its own process under the step's limit
      mkdir -p "$OUT/results/probe"
      for pr in ${PROBES:-layer:splash:8 whole:splash:8 trainer:splash:8}; do
        IFS=: read -r v im b mo op <<<"$pr"
        echo "=== probe $pr"
        timeout --kill-after=10 "$limit" "$XLABENCH_TORCH_TPU_PYTHON" benchmarks/tpu/torch_tpu_train_probe.py \
          "$v" "$im" "$b" "${mo:-gpt2-355m}" "${op:-compiled}" "$limit" 2>&1 \
          | grep -v -e '^\s*$' -e UserWarning -e 'I0000' -e '_VF.einsum' -e 'warnings.warn' \
          | tee -a "$OUT/results/probe/probe.log" | grep -e '^\[' -e '^===' -e Error | tail -30
        echo "=== probe $v $im $b: exit ${PIPESTATUS[0]}" | tee -a "$OUT/results/probe/probe.log"
      done ;;
    torch-tpu-*)  # torch-tpu-SUITE: a shipped suite's torch_tpu rows only (filters: KEY=VALUE,...)
      run_in "$step" "suites/${step#torch-tpu-}.yaml" "$limit" --backend torch_tpu "${k[@]}" ;;
    probe-trace)  # issue 49: the trace events the tuner reads for the paged kernels (benchmarks/tpu/probe_trace_events.py)
      timeout "$limit" python3 benchmarks/tpu/probe_trace_events.py 2>&1 | tee "$OUT/results/probe-trace.log" ;;
    paged-table)  # issue 49: the paged step's winners written into a copy of the shipped table, then the
      # same cases again from that table, with an empty tuning and compilation cache (as a new user's run)
      tables="$OUT/results/paged-table/tables"; mkdir -p "$tables"
      libtpu=$(python3 -c 'import importlib.metadata as m; print(m.version("libtpu"))' 2>/dev/null)
      xb tune --export "$tables/tpu_v5_lite.json" --from xlabench/tune/tables/tpu_v5_lite.json \
        --from "$XLABENCH_CACHE_DIR/tune" --commit "${XLABENCH_GIT_SHA:-unknown}" --date "$(date +%F)" \
        --libtpu "${libtpu:-unknown}" 2>&1 | tee "$OUT/paged-table.log"
      XLABENCH_TUNE_TABLES="$tables" XLABENCH_CACHE_DIR=/tmp/xlabench-cache-empty \
        run_step paged-table suites/paged_attention.yaml "$limit" --profile tpu_full -k page_size=64 -k batch=16 "${k[@]}" ;;
    train-tune)  # issue 48/49: the shipped suites' train attention shapes tuned (for the shipped table)
      run_step train-tune benchmarks/tpu/train_tune_v5e.yaml "$limit" "${k[@]}" ;;
    llama-probe)  # issue 48: the one-chip LLaMA preset's step, unrolled, splash, batch 8
      run_step llama-probe benchmarks/tpu/llama_probe_v5e.yaml "$limit" "${k[@]}" ;;
    train-mfu)  # issue 34: GPT-2 124M and 355M, seq 1024 and 4096, naive / flash / splash, up to the largest batch
      run_step train-mfu benchmarks/tpu/train_mfu_v5e.yaml "$limit" "${k[@]}" ;;
    *) echo "unknown step $step (smoke, attention, attention-cached, attention-default, paged, train, train-mfu, train-explain, train-final, train-auto, mfu-batch, train-tune, llama-probe, gpt2, llama, attention-user, paged-user, paged-table, probe-trace)"; exit 2 ;;
  esac
done
