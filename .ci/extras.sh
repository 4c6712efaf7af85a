#!/usr/bin/env bash
# Each optional extra at its LOWEST allowed versions (every lower bound in pyproject.toml pinned
# with ==) and at its HIGHEST (what pip picks under the upper bounds), in throwaway venvs under
# the user cache directory, then that extra's tests. The venvs are kept between runs, keyed by
# the Python version and the extra's requirements; the "highest" ones are upgraded once a day.
#
#   .ci/extras.sh                  every extra, both ends
#   .ci/extras.sh pydantic-ai      one extra (several may be given)
#   EXTRAS_MODES=lowest .ci/extras.sh langchain
#
# The postgres extra's tests need AUTOCOMPACT_TEST_POSTGRES_DSN (.ci/run starts the server);
# without it they are skipped. Exits non-zero when any install or test run fails.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
PYTHON="${PYTHON:-python3}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/autocompact-ci/extras"
mkdir -p "$CACHE"
extras=("$@")
if [ ${#extras[@]} -eq 0 ]; then
    read -r -a extras <<<"$("$PYTHON" .ci/extras.py all-extras)"
fi
read -r -a modes <<<"${EXTRAS_MODES:-lowest highest}"
failed=()
start=$SECONDS
for extra in "${extras[@]}"; do
    for mode in "${modes[@]}"; do
        t0=$SECONDS
        venv="$CACHE/$("$PYTHON" .ci/extras.py "$extra" key "$mode")"
        stamp="$venv/.installed"
        today="$(date -u +%F)"
        if [ ! -f "$stamp" ] || { [ "$mode" = highest ] && [ "$(cat "$stamp")" != "$today" ]; }; then
            [ -x "$venv/bin/python" ] || "$PYTHON" -m venv "$venv"
            reqs="$venv/requirements.txt"
            "$PYTHON" .ci/extras.py "$extra" requirements >"$reqs"
            args=(-q -r "$reqs")
            if [ "$mode" = lowest ]; then
                "$PYTHON" .ci/extras.py "$extra" lowest >"$venv/constraints.txt"
                args+=(--constraint "$venv/constraints.txt")
            else
                args+=(--upgrade --upgrade-strategy eager)
            fi
            # The project's own dependencies (the CLI's) with the extra; the project itself
            # runs from src/ (PYTHONPATH), so the venv never points at a checkout.
            if ! "$venv/bin/pip" install "${args[@]}" 'rich>=13' 'prompt_toolkit>=3.0.40' 'platformdirs>=4'; then
                echo "FAIL $extra ($mode): pip could not install it"
                failed+=("$extra/$mode:install")
                continue
            fi
            echo "$today" >"$stamp"
        fi
        versions="$("$venv/bin/pip" freeze 2>/dev/null | grep -iE "^($(
            "$PYTHON" .ci/extras.py "$extra" lowest | sed 's/==.*//; s/\[.*//; s/[-_.]/[-_.]/g' | paste -sd'|'
        ))==" | paste -sd' ' || true)"
        read -r -a tests <<<"$("$PYTHON" .ci/extras.py "$extra" tests)"
        # Only the postgres extra installs psycopg: elsewhere its store variants are deselected.
        select=()
        [ "$extra" = postgres ] || select=(-k "not postgres")
        if PYTHONPATH="$PWD/src:$PWD/tests" "$venv/bin/python" -m pytest -o addopts= -q \
            -p no:cacheprovider "${select[@]}" "${tests[@]}" >"$venv/pytest.log" 2>&1; then
            echo "ok   $extra ($mode: $versions): $(tail -n 1 "$venv/pytest.log") [$((SECONDS - t0))s]"
        else
            echo "FAIL $extra ($mode: $versions): $(tail -n 1 "$venv/pytest.log") [$((SECONDS - t0))s]"
            tail -n 30 "$venv/pytest.log"
            failed+=("$extra/$mode")
        fi
    done
done
echo "extras checked in $((SECONDS - start))s"
if [ ${#failed[@]} -gt 0 ]; then
    echo "failed: ${failed[*]}"
    exit 1
fi
