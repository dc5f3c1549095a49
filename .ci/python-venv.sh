#!/usr/bin/env bash
# The Python tools the tests run (pymongo for tests/it/sim_pymongo.rs and the
# check below; kubernetes-validate and PyYAML for tests/it/kubernetes.rs), in
# a virtual environment of Debian's own python3: bookworm's python3 refuses
# `pip install` outside one (PEP 668, "externally-managed-environment").
# Prints the environment's bin directory; put it first on PATH so the tests'
# `python3` is the environment's.
#   usage: .ci/python-venv.sh [DIR]      (default target/ci-venv)
# PYTHON picks the interpreter (default /usr/bin/python3, not whatever
# pyenv or another Python puts first on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-/usr/bin/python3}"
venv="${1:-target/ci-venv}"
if ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
    # Debian splits venv's pip bootstrap out of python3.
    apt-get install -y -q --no-install-recommends python3-venv >/dev/null
fi
if [ ! -x "$venv/bin/python3" ]; then
    "$python" -m venv "$venv" >&2
fi
"$venv/bin/python3" -m pip install --quiet --disable-pip-version-check \
    pymongo kubernetes-validate >&2
"$venv/bin/python3" -c 'import pymongo, yaml, kubernetes_validate' >&2
cd "$venv/bin" && pwd
