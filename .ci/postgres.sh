#!/usr/bin/env bash
# Start or stop a throwaway PostgreSQL 15 for the store tests (CI and local runs alike).
#
#   eval "$(.ci/postgres.sh start)"   # prints export lines: AUTOCOMPACT_TEST_POSTGRES_DSN, ..._DIR
#   .ci/postgres.sh stop "$AUTOCOMPACT_TEST_POSTGRES_DIR"
#
# The server runs from a fresh temporary directory (initdb), listens on 127.0.0.1 on a free port
# and on a Unix socket inside that directory, and requires a random password over TCP (so the
# tests can check that it never leaks into logs, errors or files). PostgreSQL refuses to run as
# root: as root the server runs as the unprivileged `postgres` user (created when missing).
set -euo pipefail

PG_BIN="${PG_BIN:-/usr/lib/postgresql/15/bin}"

as_owner() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u "$PG_USER" -- "$@"
    else
        "$@"
    fi
}

start() {
    if [ ! -x "$PG_BIN/postgres" ]; then
        echo "postgres.sh: no PostgreSQL server at $PG_BIN (set PG_BIN)" >&2
        exit 1
    fi
    PG_USER="$(id -un)"
    if [ "$(id -u)" = 0 ]; then
        PG_USER=postgres
        if ! id -u "$PG_USER" >/dev/null 2>&1; then
            useradd --system --no-create-home --shell /usr/sbin/nologin "$PG_USER"
        fi
    fi
    local dir port password
    dir="$(mktemp -d /tmp/autocompact-pg.XXXXXX)"
    chmod 0700 "$dir"
    [ "$(id -u)" = 0 ] && chown "$PG_USER" "$dir"
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    password="$(python3 -c 'import secrets; print("pw-" + secrets.token_hex(12))')"
    printf '%s\n' "$password" > "$dir/pwfile"
    [ "$(id -u)" = 0 ] && chown "$PG_USER" "$dir/pwfile"
    as_owner "$PG_BIN/initdb" -D "$dir/data" -U autocompact --pwfile="$dir/pwfile" \
        --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; exit 1; }
    rm -f "$dir/pwfile"
    as_owner "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=on -c max_connections=100" \
        start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
    as_owner "$PG_BIN/createdb" -h "$dir" -p "$port" -U autocompact autocompact
    printf '%s\n' "$PG_USER" > "$dir/owner"
    echo "export AUTOCOMPACT_TEST_POSTGRES_DSN='postgresql://autocompact:$password@127.0.0.1:$port/autocompact'"
    echo "export AUTOCOMPACT_TEST_POSTGRES_DIR='$dir'"
}

stop() {
    local dir="${1:-${AUTOCOMPACT_TEST_POSTGRES_DIR:-}}"
    [ -n "$dir" ] && [ -d "$dir/data" ] || return 0
    PG_USER="$(cat "$dir/owner" 2>/dev/null || id -un)"
    as_owner "$PG_BIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$dir"
}

case "${1:-}" in
    start) start ;;
    stop) stop "${2:-}" ;;
    *) echo "usage: $0 start | stop DIR" >&2; exit 2 ;;
esac
