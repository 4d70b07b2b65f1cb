#!/usr/bin/env bash
# The site's GPU half in one run: every gpu-marked test and the GPU benchmarks, under hard time
# limits, packed into $OUT/gpu_run.tar.gz (docs/results/, docs/figures/, logs/) plus $OUT/gpu_run.log.
#
#   tools/gpu_run.sh               on a CUDA machine; needs no network (torch, triton, transformers,
#                                  pytest and matplotlib from the machine; inferlab from code/)
#   tools/gpu_run.sh --dry-run     on a CPU: every step on tiny sizes, then checks the archive
#   tools/gpu_run.sh --unpack A    check archive A and unpack its docs/ into this checkout
#
# PYTHON picks the interpreter (default: python3). The steps live in tools/gpu_run.py.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="${PYTHON:-python3}"
exec "$python" "$here/gpu_run.py" --python "$python" "$@"
