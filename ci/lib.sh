# Shared by the ci/ scripts and .ci/run: `source "$(dirname "$0")/lib.sh"` (from ci/) or
# `source ci/lib.sh`. Functions only; sourcing it changes nothing.

# missing_packages PKG...: prints, one per line, each package dpkg does not list as installed.
missing_packages() {
    local p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"
    done
}

# ensure_packages WHO PKG...: installs the missing ones with apt-get (as root); exits 1 naming
# them when not root or when apt-get fails. WHO prefixes the messages.
ensure_packages() {
    local who=$1
    shift
    local missing
    mapfile -t missing < <(missing_packages "$@")
    [ "${#missing[@]}" -gt 0 ] || return 0
    if [ "$(id -u)" -ne 0 ]; then
        echo "$who: needs ${missing[*]} (apt-get install, as root)" >&2
        exit 1
    fi
    echo "== apt-get install ${missing[*]}"
    apt-get update -qq </dev/null || { echo "$who: apt-get update failed" >&2; exit 1; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null >/dev/null \
        || { echo "$who: apt-get install ${missing[*]} failed" >&2; exit 1; }
}

# try_packages WHO PKG...: installs the missing ones with apt-get, one by one, when root; a package
# that cannot be installed (not root, no apt-get, apt-get failing) is a warning, not an error: the
# caller reports what is missing (a skipped command, a peer not measured).
try_packages() {
    local who=$1
    shift
    local missing p
    mapfile -t missing < <(missing_packages "$@")
    [ "${#missing[@]}" -gt 0 ] || return 0
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "== $who: missing ${missing[*]} and cannot apt-get install as $(id -un); the report says what is missing" >&2
        return 0
    fi
    echo "== apt-get install ${missing[*]}"
    apt-get update -qq </dev/null || echo "== $who: apt-get update failed; continuing" >&2
    for p in "${missing[@]}"; do
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$p" </dev/null >/dev/null \
            || echo "== $who: could not install $p; the report says what is missing" >&2
    done
}

# failure_digest LOG: prints what failed in a test log (nextest's FAIL/TIMEOUT lines, a test
# binary's "... FAILED" lines, ci/test's "-- ... FAILED" and "== FAILED" lines, and each panic
# with the lines after it), at most 120 lines, so that the end of a long CI log says what broke.
failure_digest() {
    local log=$1
    [ -f "$log" ] || { echo "(no log at $log)"; return 0; }
    grep -a -n -A6 -E '^[[:space:]]+(FAIL|TIMEOUT|SIGSEGV|SIGABRT|SIGKILL|LEAK)[[:space:]]+\[|^-- .* FAILED|^test .* \.\.\. FAILED$|^== (FAILED|RELEASE GATE FAILED)|panicked at|: FAILED|^error(\[|:)' "$log" \
        | awk '!seen[$0]++' | head -120
}
