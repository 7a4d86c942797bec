#!/usr/bin/env bash
# TorchTPU's environment on a TPU host with no package index of its own (the `device` tool's v5e-1), from a
# bundle made by benchmarks/torch_tpu_bundle.sh: torch (CPU build) from the host's own wheels (TORCH_WHEELS,
# default /opt/wheels) and index (PIP_INDEX, default file:///opt/pypi/simple), torch_tpu unpacked, all under
# /tmp; then a python wrapper, /tmp/torch-tpu-python, that puts them first. Sourced by tpu_session.sh, which
# exports XLABENCH_TORCH_TPU_PYTHON to it (xlabench's torch_tpu workers run on it).
# A host whose libtpu reports a four-part version (0.0.42.1) is refused by torch_tpu 0.2.0's loader ("expected
# version string ... got '0.0.42.1'"): with LIBTPU_VERSION_SHIM=1 the installed loader passes the first three
# parts. This host set-up lives here, never in xlabench; a user's TPU VM gets libtpu >= 0.0.50 with torch-tpu.
# Usage: BUNDLE=.ttpu source benchmarks/torch_tpu_env.sh   (idempotent: a complete /tmp install is kept)
tt_site=/tmp/ttsite; tt_deps=/tmp/ttdeps; tt_python=/tmp/torch-tpu-python
if [ ! -f "$tt_site/.complete" ]; then
  [ -d "${BUNDLE:-}" ] || { echo "torch_tpu: no bundle folder (BUNDLE=${BUNDLE:-unset}); its rows will be skipped"; return 0 2>/dev/null || exit 0; }
  t0=$(date +%s); mkdir -p "$tt_site" "$tt_deps"
  tt_pip() { PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-compile "$@" 2>&1 | grep -v -e notice -e 'already exists'; }
  tt_pip --only-binary=:all: --no-deps --index-url "${PIP_INDEX:-file:///opt/pypi/simple}" \
    --find-links "${TORCH_WHEELS:-/opt/wheels}" --target "$tt_site" 'torch==2.13.*'
  tt_pip --no-index --no-deps --target "$tt_site" "$BUNDLE"/*.whl
  tt_pip --only-binary=:all: --index-url "${PIP_INDEX:-file:///opt/pypi/simple}" --target "$tt_deps" \
    typing-extensions sympy networkx jinja2 fsspec filelock markupsafe mpmath absl-py tensorboard
  tar -xJf "$BUNDLE"/torch_tpu-*.tar.xz -C "$tt_site"
  if [ "${LIBTPU_VERSION_SHIM:-0}" = 1 ]; then
    sed -i 's/  env.set_libtpu_version(version)/  env.set_libtpu_version(".".join(version.split(".")[:3]))/' \
      "$tt_site/torch_tpu/_loader.py"
  fi
  touch "$tt_site/.complete"
  echo "torch_tpu environment installed under /tmp in $(( $(date +%s) - t0 )) s"
fi
cat > "$tt_python" <<PY
#!/bin/sh
# torch 2.13 (CPU build) and torch_tpu first, then what the caller's PYTHONPATH holds (xlabench, its packages)
export PYTHONPATH="$tt_site:$tt_deps\${PYTHONPATH:+:\$PYTHONPATH}"
export PYTHONWARNINGS="\${PYTHONWARNINGS:-ignore:<TorchTpu/Performance/TcMalloc/}"
tc=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
[ -f "\$tc" ] && export LD_PRELOAD="\$tc\${LD_PRELOAD:+:\$LD_PRELOAD}"
exec python3 "\$@"
PY
chmod +x "$tt_python"
export XLABENCH_TORCH_TPU_PYTHON=$tt_python
