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

# --- the release gate's builds -------------------------------------------------------------------
# Each suite runs its own build with these, and so does ci/prebuild, which .ci/run starts to warm
# them while ci/test runs: the same flags, so that a suite finds the lane's output fresh (or builds
# what the lane did not get to, or failed at). Run from the repository's root.

# build_static_x86 CARGO_ARGS…: release, static-pie, x86_64 (`crt-static` needs an explicit
# --target: proc-macros are built for the host without it).
build_static_x86() {
    RUSTFLAGS="-C target-feature=+crt-static" cargo build --quiet --release -j"${BENCH_JOBS:-2}" \
        --target x86_64-unknown-linux-gnu "$@" </dev/null
}

# build_static_aarch64 CARGO_ARGS…: the same for aarch64-unknown-linux-gnu, by Debian's rustc-web
# (-Zbuild-std: rustup has only the x86_64 target here), linked by gcc-aarch64-linux-gnu, into
# target/debian-cross.
build_static_aarch64() {
    env PATH=/usr/bin:/bin RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="$PWD/target/debian-cross" \
        CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc RUSTFLAGS="-C target-feature=+crt-static" \
        /usr/bin/cargo build --quiet --release -j"${BENCH_JOBS:-2}" -Zbuild-std=std,panic_abort \
        --target aarch64-unknown-linux-gnu "$@" </dev/null
}

# build_matrix_bins amd64|arm64: the kernel matrix's guest binaries, localgpt and lgmatrix, static.
build_matrix_bins() {
    case $1 in
        amd64) build_static_x86 --bin localgpt && build_static_x86 --manifest-path matrix/Cargo.toml --target-dir "$PWD/target" ;;
        arm64) build_static_aarch64 --bin localgpt && build_static_aarch64 --manifest-path matrix/Cargo.toml ;;
        *) echo "build_matrix_bins: unknown architecture $1" >&2; return 1 ;;
    esac
}

# build_ablation: the test-only ablation binary (`--features ablation`, never shipped), copied to
# target/ablation/release/localgpt, and localgpt-ablation. It is built in target/ with the release
# build, whose dependencies it shares: one build of them instead of two (a target dir of its own
# built them all again: 748 s of the lane's 2026 s on a fresh machine). The shipped binary is put
# back at target/release/localgpt before this returns (cargo links the fresh default build there
# again, in 0.1 s); the copy is written under a temporary name and moved into place.
build_ablation() {
    local out=target/ablation/release
    cargo build --quiet --release -j"${BENCH_JOBS:-2}" --features ablation -p localgpt </dev/null \
        && mkdir -p "$out" && cp target/release/localgpt "$out/.localgpt.$$" && mv -f "$out/.localgpt.$$" "$out/localgpt" \
        && cargo build --quiet --release -j"${BENCH_JOBS:-2}" --bin localgpt </dev/null \
        && cargo build --quiet --release -j"${BENCH_JOBS:-2}" -p localgpt-harness --bin localgpt-ablation </dev/null
}

# build_release_benches: the release localgpt (the macro and proxy benches measure it) and the
# benches' binaries.
build_release_benches() {
    cargo build --quiet --release -j"${BENCH_JOBS:-2}" --bin localgpt </dev/null \
        && cargo build --quiet --release -j"${BENCH_JOBS:-2}" -p localgpt-bench </dev/null
}

# install_sandlock: Sandlock's CLI (the latency bench's second peer) from its public source on
# crates.io, into target/peers.
SANDLOCK_VERSION=0.9.0
install_sandlock() {
    cargo install --quiet --locked sandlock-cli --version "$SANDLOCK_VERSION" --root "$PWD/target/peers" \
        -j"${BENCH_JOBS:-2}" </dev/null
}

# wait_prebuild WHO: when .ci/run started ci/prebuild (LGCI_PREBUILD names its files), waits until
# it has ended, so that a benchmark does not measure a busy machine and a build does not queue
# behind the lane's; then prints what the lane did. Does nothing otherwise.
wait_prebuild() {
    local f=${LGCI_PREBUILD:-} pid
    [ -n "$f" ] && [ -s "$f.pid" ] || return 0
    pid=$(cat "$f.pid")
    if [ ! -e "$f.status" ]; then
        echo "== $1: waiting for ci/prebuild (pid $pid) to end"
        # A zombie (state Z) has ended too: it only waits for its parent.
        while [ ! -e "$f.status" ] && kill -0 "$pid" 2>/dev/null \
            && ! sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | grep -q '^Z'; do
            sleep 2
        done
    fi
    echo "== ci/prebuild: $(cat "$f.status" 2>/dev/null || echo "ended without a status (see $f.log)")"
}
