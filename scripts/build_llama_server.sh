#!/usr/bin/env bash
# Install llama-cpp-python[server] (the judge test server) from a cached CPU wheel; build the wheel once.
#
# Idempotent: does nothing when the pinned version is already installed; installs a wheel found in
# ${EVALIGN_WHEEL_CACHE:-$HOME/.cache/evalign-wheels}; otherwise builds one there first (about 15 min
# on 2 cores), then installs it with the [server] extra (fastapi, uvicorn, sse-starlette, ...).
set -euo pipefail

VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
CACHE="${EVALIGN_WHEEL_CACHE:-$HOME/.cache/evalign-wheels}"
PYTHON="${PYTHON:-python}"

installed="$("$PYTHON" - <<'PY' 2>/dev/null || true
from importlib import metadata
try:
    import llama_cpp.server, sse_starlette, uvicorn  # noqa: F401
    print(metadata.version("llama_cpp_python"))
except Exception:
    pass
PY
)"
if [[ "$installed" == "$VERSION" ]]; then
    echo "llama-cpp-python[server] $VERSION already installed"
    exit 0
fi

mkdir -p "$CACHE"
shopt -s nullglob
wheels=("$CACHE"/llama_cpp_python-"$VERSION"-*.whl)
if (( ${#wheels[@]} == 0 )); then
    echo "building llama-cpp-python $VERSION wheel into $CACHE (CPU, generic x86-64; this takes a while)"
    CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF}" \
    CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
        "$PYTHON" -m pip wheel --no-deps "llama-cpp-python==$VERSION" -w "$CACHE"
    wheels=("$CACHE"/llama_cpp_python-"$VERSION"-*.whl)
    if (( ${#wheels[@]} == 0 )); then
        echo "error: the build produced no wheel in $CACHE" >&2
        exit 1
    fi
fi
echo "installing ${wheels[0]}[server]"
"$PYTHON" -m pip install "${wheels[0]}[server]"
"$PYTHON" -c "import llama_cpp.server, llama_cpp; print('llama-cpp-python', llama_cpp.__version__, 'ready')"
