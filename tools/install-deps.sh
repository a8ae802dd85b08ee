#!/usr/bin/env bash
# install-deps.sh: installs what minfer needs on a fresh Debian machine:
# the build (gcc, ninja, pkg-config, Lua 5.4, re2c), the tests (Criterion,
# clang with libFuzzer), the server's libraries (libmicrohttpd, cJSON) and
# the test references: the Python gguf package, Hugging Face tokenizers,
# the official openai client (the server's tests), and dashscope for the
# Qwen vocabulary file it ships (its own dependencies are not needed: only
# that file is read).
# The CUDA toolkit is not installed here: with nvcc on PATH (or in
# /usr/local/cuda) the build adds the CUDA backend, without it it is CPU-only.
set -euo pipefail

as_root=()
[ "$(id -u)" = 0 ] || as_root=(sudo)

"${as_root[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq \
    gcc ninja-build pkg-config lua5.4 liblua5.4-dev re2c libcriterion-dev \
    clang libclang-rt-dev python3 python3-pip libmicrohttpd-dev libcjson-dev >/dev/null

# Debian's own python3 refuses pip installs into the system; a user-level
# python (pyenv, venv) accepts them. Try the polite way first.
pip_install() { python3 -m pip install --quiet --disable-pip-version-check "$@"; }
pip_install gguf numpy tokenizers openai 2>/dev/null || pip_install --break-system-packages gguf numpy tokenizers openai
pip_install --no-deps dashscope 2>/dev/null || pip_install --break-system-packages --no-deps dashscope
echo "install-deps: done"
