# Shared set-up for scripts/test and scripts/demo (sourced, not run).
# Creates the virtualenv and installs the project with its test extras; on a
# machine that has everything already this takes a few seconds.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${XSM_VENV:-$ROOT/.venv}"

xsm_pick_python() {
    # First interpreter >= 3.11 found; XSM_PYTHON overrides.
    local c
    for c in "${XSM_PYTHON:-}" python3 python3.12 python3.13 python3.11 \
             /root/.pyenv/versions/3.12*/bin/python3.12 /usr/bin/python3; do
        [ -n "$c" ] || continue
        if "$c" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
            >/dev/null 2>&1; then
            echo "$c"; return 0
        fi
    done
    echo "no Python >= 3.11 found (set XSM_PYTHON)" >&2
    return 1
}

xsm_bootstrap() {
    local extras="${1:-dev}" py stamp
    if [ ! -x "$VENV/bin/python" ]; then
        py="$(xsm_pick_python)"
        echo "==> creating $VENV with $py" >&2
        "$py" -m venv "$VENV" || {
            echo "could not create a virtualenv with $py; on Debian/Ubuntu install" \
                 "python3-venv (apt-get install python3-venv) and run this again" >&2
            return 1
        }
        "$VENV/bin/python" -m pip install -q --upgrade pip >&2
    fi
    # Reinstall only when the dependency list (or the extra pins) changed.
    stamp="$VENV/.xsm-installed-$extras-$(printf '%s' "${XSM_EXTRA_PIP:-}" | cksum | cut -d' ' -f1)"
    if [ ! -f "$stamp" ] || [ "$ROOT/pyproject.toml" -nt "$stamp" ]; then
        echo "==> installing django-xsm[$extras] into $VENV" >&2
        "$VENV/bin/python" -m pip install -q -e "$ROOT[$extras]" ${XSM_EXTRA_PIP:-} >&2
        touch "$stamp"
    fi
    export PATH="$VENV/bin:$PATH"
}

xsm_redis_ping() {  # xsm_redis_ping URL -> 0 when it answers PONG
    "$VENV/bin/python" - "$1" <<'PY' >/dev/null 2>&1
import sys, redis
sys.exit(0 if redis.Redis.from_url(sys.argv[1], socket_timeout=1, socket_connect_timeout=1).ping() else 1)
PY
}

xsm_apt_install() {  # xsm_apt_install PACKAGE: as root, or through sudo
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            sudo=(sudo)
        else
            echo "$1 is missing and this user cannot install it (not root, no sudo);" \
                 "install it with: sudo apt-get install $1" >&2
            return 1
        fi
    fi
    "${sudo[@]}" apt-get install -y -q "$1" >/dev/null 2>&1 && return 0
    "${sudo[@]}" apt-get update -q >/dev/null 2>&1
    "${sudo[@]}" apt-get install -y -q "$1" >/dev/null
}

xsm_ensure_redis() {
    # Exports XSM_REDIS_URL: the given one, else 127.0.0.1:6379 (db 15) when
    # it answers, else a redis-server of our own on a free loopback port
    # (installed from Debian's packages when absent, stopped at exit by pid).
    if [ -n "${XSM_REDIS_URL:-}" ]; then
        xsm_redis_ping "$XSM_REDIS_URL" || { echo "XSM_REDIS_URL=$XSM_REDIS_URL does not answer" >&2; return 1; }
        return 0
    fi
    if xsm_redis_ping "redis://127.0.0.1:6379/15"; then
        export XSM_REDIS_URL="redis://127.0.0.1:6379/15"
        return 0
    fi
    if ! command -v redis-server >/dev/null 2>&1; then
        echo "==> installing redis-server" >&2
        xsm_apt_install redis-server || {
            echo "live-Redis tests will be skipped (no redis-server)" >&2
            return 0
        }
    fi
    local port dir
    port="$("$VENV/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
    dir="$(mktemp -d /tmp/xsm-redis-XXXXXX)"
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
        --dir "$dir" --daemonize yes --pidfile "$dir/redis.pid" >/dev/null
    XSM_OWN_REDIS_PIDFILE="$dir/redis.pid"
    trap 'kill "$(cat "$XSM_OWN_REDIS_PIDFILE" 2>/dev/null)" 2>/dev/null || true' EXIT
    export XSM_REDIS_URL="redis://127.0.0.1:$port/0"
    local i
    for i in $(seq 1 50); do
        xsm_redis_ping "$XSM_REDIS_URL" && return 0
        sleep 0.1
    done
    echo "redis-server on port $port did not start" >&2
    return 1
}

xsm_pg_ping() {  # xsm_pg_ping HOST PORT -> 0 when PostgreSQL answers
    "$VENV/bin/python" - "$1" "$2" <<'PY' >/dev/null 2>&1
import sys, psycopg
psycopg.connect(host=sys.argv[1], port=int(sys.argv[2]), user="postgres", dbname="postgres",
                connect_timeout=2).close()
PY
}

xsm_ensure_postgres() {
    # The model-field tests also run on PostgreSQL: the given XSM_PG_HOST /
    # XSM_PG_PORT, else 127.0.0.1:5432 when it answers, else a private
    # server on a free loopback port (Debian's postgresql package, trust
    # auth, stopped at exit by pid). Without one those tests skip, unless
    # XSM_REQUIRE_PG=1 (CI), which makes them fail.
    local host="${XSM_PG_HOST:-127.0.0.1}" port="${XSM_PG_PORT:-5432}"
    if xsm_pg_ping "$host" "$port"; then return 0; fi
    local bin
    bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
    if [ -z "$bin" ]; then
        echo "==> installing postgresql (Debian package) for the model-field tests" >&2
        xsm_apt_install postgresql || { echo "PostgreSQL tests will be skipped" >&2; return 0; }
        bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
    fi
    local dir runas=()
    dir="$(mktemp -d /tmp/xsm-pg-XXXXXX)"
    port="$("$VENV/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
    if [ "$(id -u)" -eq 0 ]; then chown postgres "$dir"; runas=(runuser -u postgres --); fi
    "${runas[@]}" "$bin/initdb" -D "$dir/data" -U postgres --auth=trust >/dev/null
    "${runas[@]}" "$bin/pg_ctl" -D "$dir/data" -o "-p $port -k $dir -c listen_addresses=127.0.0.1" \
        -l "$dir/log" -w start >/dev/null
    XSM_OWN_PG_DIR="$dir"
    trap 'kill "$(cat "${XSM_OWN_REDIS_PIDFILE:-/dev/null}" 2>/dev/null)" 2>/dev/null || true;
          kill "$(head -1 "$XSM_OWN_PG_DIR/data/postmaster.pid" 2>/dev/null)" 2>/dev/null || true' EXIT
    export XSM_PG_HOST=127.0.0.1 XSM_PG_PORT="$port"
}

xsm_ensure_chromium() {
    # The browser tests drive Debian's chromium through Playwright
    # (executable_path); Playwright never downloads a browser here.
    if [ -x /usr/bin/chromium ]; then return 0; fi
    echo "==> installing chromium (Debian package) for the browser tests" >&2
    xsm_apt_install chromium || echo "browser tests will be skipped (no chromium)" >&2
}

xsm_ensure_graphviz() {
    # The admin's diagram and `xsm_graph --format svg` use Graphviz's `dot`
    # when it is on PATH (an optional dependency: without it they draw with
    # the built-in layout). The tests of the Graphviz renderer need it; in CI
    # (CI=true or XSM_REQUIRE_GRAPHVIZ=1) a missing `dot` fails them.
    if command -v dot >/dev/null 2>&1; then return 0; fi
    echo "==> installing graphviz (Debian package) for the diagram tests" >&2
    xsm_apt_install graphviz || echo "Graphviz diagram tests will be skipped (no dot)" >&2
}

xsm_find_python() {  # xsm_find_python 3.12 -> the path of a CPython 3.12, or 1
    # For the support-matrix legs (scripts/ci_matrix): PATH, pyenv's builds,
    # then Debian's and /usr/local's, each checked by what it says it is.
    local want="$1" c
    for c in "python$want" /root/.pyenv/versions/"$want".*/bin/python"$want" \
             "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$want".*/bin/python"$want" \
             /usr/bin/python"$want" /usr/local/bin/python"$want"; do
        if "$c" -c 'import sys; sys.exit(f"{sys.version_info[0]}.{sys.version_info[1]}" != sys.argv[1])' \
            "$want" >/dev/null 2>&1; then
            command -v "$c"; return 0
        fi
    done
    return 1
}
