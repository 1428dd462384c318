#!/usr/bin/env bash
# Runner of the GPU bundle made by scripts/gpu-bundle; copied into it as gpu-bundle/run.sh.
# Needs only bash, coreutils and the CUDA driver (no Rust). Run from the repository root:
#
#   bash gpu-bundle/run.sh [--sanitize] [--bench] [--only-bench]
#
#   --bench       also run the bench binaries (with --bench) after the tests
#   --only-bench  run only the bench binaries (no tests, no selftest)
#   --sanitize    also run every test binary under compute-sanitizer memcheck and racecheck
#
# Logs go to $OUT if set, else gpu-bundle/logs: gpu-tests.log (GPU info, selftest, every test
# binary, summary), sanitizer.log (--sanitize), bench.log (--bench; benchmarks also write
# their JSON results to $RADIO_KERNELS_BENCH_OUT, the same folder). The last line is
#   gpu-tests: N passed, M failed, K ignored
# and the exit status is non-zero if any binary, sanitizer run or benchmark failed.
# GPU_RUN_TIMEOUT (seconds per binary, default 300; 0 = none) bounds a hung kernel.
set -uo pipefail
shopt -s nullglob

BUNDLE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RUN_TESTS=1
RUN_BENCH=0
SANITIZE=0
for arg in "$@"; do
    case "$arg" in
        --bench) RUN_BENCH=1 ;;
        --only-bench) RUN_BENCH=1; RUN_TESTS=0 ;;
        --sanitize) SANITIZE=1 ;;
        -h|--help) sed -n '2,16p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) echo "gpu-run: unknown option $arg (try --help)" >&2; exit 2 ;;
    esac
done

# scripts/gpu-bundle packs the binaries into payload.tar.xz; unpack them on first use (with
# python3's tarfile where there is no xz).
if [[ -f "$BUNDLE/payload.tar.xz" && ! -e "$BUNDLE/tests" ]]; then
    if command -v xz >/dev/null; then
        tar xJf "$BUNDLE/payload.tar.xz" -C "$BUNDLE"
    else
        # extractall's filter argument is Python 3.12 (or a security backport) only.
        python3 -c '
import sys, tarfile
with tarfile.open(sys.argv[1]) as payload:
    try:
        payload.extractall(sys.argv[2], filter="tar")
    except TypeError:
        payload.extractall(sys.argv[2])' "$BUNDLE/payload.tar.xz" "$BUNDLE"
    fi || { echo "gpu-run: cannot unpack $BUNDLE/payload.tar.xz" >&2; exit 1; }
fi

LOG_DIR="${OUT:-$BUNDLE/logs}"
mkdir -p "$LOG_DIR"
LOG_DIR="$(cd "$LOG_DIR" && pwd)"
TEST_LOG="$LOG_DIR/gpu-tests.log"
SAN_LOG="$LOG_DIR/sanitizer.log"
BENCH_LOG="$LOG_DIR/bench.log"
: >"$TEST_LOG"
TIMEOUT="${GPU_RUN_TIMEOUT:-300}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

log() { echo "$*" | tee -a "$TEST_LOG"; }

# Runs "$@" under the per-binary timeout, all output to $TMP/out; returns its status.
run_captured() {
    if [[ "$TIMEOUT" != 0 ]] && command -v timeout >/dev/null; then
        timeout --kill-after=10 "$TIMEOUT" "$@" >"$TMP/out" 2>&1
    else
        "$@" >"$TMP/out" 2>&1
    fi
}

# Prints the last lines of a failed run so the failure shows without the logs.
show_tail() {
    echo "---- last 30 lines of $1 ----"
    tail -n 30 "$TMP/out"
    echo "----"
}

TOTAL_PASSED=0
TOTAL_FAILED=0
TOTAL_IGNORED=0
STATUS=0
RESULTS=()

# ---- GPU ---------------------------------------------------------------------------------
GPU_NAME="unknown (nvidia-smi failed)"
if smi="$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1)"; then
    GPU_NAME="$(head -n 1 <<<"$smi" | cut -d, -f1)"
fi
log "$smi"
[[ -f "$BUNDLE/BUILD-INFO" ]] && tee -a "$TEST_LOG" <"$BUNDLE/BUILD-INFO"

# ---- selftest and tests -------------------------------------------------------------------
if [[ $RUN_TESTS == 1 ]]; then
    if [[ -x "$BUNDLE/radio-kernels" ]]; then
        log "==== radio-kernels selftest"
        run_captured "$BUNDLE/radio-kernels" selftest
        rc=$?
        cat "$TMP/out" >>"$TEST_LOG"
        if [[ $rc == 0 ]]; then
            RESULTS+=("PASS radio-kernels selftest")
        else
            RESULTS+=("FAIL radio-kernels selftest (exit $rc)")
            STATUS=1
            show_tail "radio-kernels selftest"
        fi
    fi

    for bin in "$BUNDLE"/tests/*; do
        [[ -x "$bin" && -f "$bin" ]] || continue
        name="$(basename "$bin")"
        log "==== $name --include-ignored"
        start=$SECONDS
        run_captured "$bin" --include-ignored
        rc=$?
        cat "$TMP/out" >>"$TEST_LOG"
        # Sum every libtest summary line of this binary.
        read -r p f i n < <(awk '
            /^test result: / {
                n++
                for (k = 2; k <= NF; k++) {
                    if ($k ~ /^passed;?$/)  p += $(k-1)
                    if ($k ~ /^failed;?$/)  f += $(k-1)
                    if ($k ~ /^ignored;?$/) i += $(k-1)
                }
            }
            END { print p+0, f+0, i+0, n+0 }' "$TMP/out")
        note=""
        if [[ $rc != 0 && $f == 0 ]]; then
            # Crashed, aborted or timed out before libtest could count a failure.
            f=1
            if [[ $rc == 124 || $rc == 137 ]]; then note=" timed out after ${TIMEOUT}s"; else note=" exit $rc"; fi
        elif [[ $rc != 0 ]]; then
            note=" exit $rc"
        elif [[ $n == 0 ]]; then
            note=" no libtest summary"
        fi
        TOTAL_PASSED=$((TOTAL_PASSED + p))
        TOTAL_FAILED=$((TOTAL_FAILED + f))
        TOTAL_IGNORED=$((TOTAL_IGNORED + i))
        if [[ $rc == 0 ]]; then
            RESULTS+=("PASS $name ($p/$f/$i)$note")
            echo "  ok: $p passed, $i ignored ($((SECONDS - start))s)"
        else
            RESULTS+=("FAIL $name ($p/$f/$i)$note")
            STATUS=1
            show_tail "$name"
        fi
    done
fi

# ---- compute-sanitizer ------------------------------------------------------------------
if [[ $SANITIZE == 1 && $RUN_TESTS == 1 ]]; then
    SAN=""
    for c in compute-sanitizer /usr/local/cuda/bin/compute-sanitizer \
        /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
        if command -v "$c" >/dev/null; then SAN="$(command -v "$c")"; break; fi
    done
    : >"$SAN_LOG"
    if [[ -z "$SAN" ]]; then
        RESULTS+=("FAIL compute-sanitizer (not found)")
        STATUS=1
    else
        for bin in "$BUNDLE"/tests/*; do
            [[ -x "$bin" && -f "$bin" ]] || continue
            name="$(basename "$bin")"
            for tool in memcheck racecheck; do
                echo "==== $tool $name" | tee -a "$SAN_LOG"
                run_captured "$SAN" --tool "$tool" --error-exitcode 1 \
                    "$bin" --include-ignored --test-threads=1
                rc=$?
                cat "$TMP/out" >>"$SAN_LOG"
                summary="$(grep -E '(ERROR|RACECHECK) SUMMARY' "$TMP/out" | tail -n 1 | sed 's/^=* *//')"
                if grep -q 'Target application terminated before first instrumented API call' "$TMP/out"; then
                    # The binary makes no CUDA call (a CPU-only test binary): nothing to check.
                    RESULTS+=("SKIP $tool $name (no CUDA calls)")
                elif [[ $rc == 0 ]]; then
                    RESULTS+=("PASS $tool $name (${summary:-no summary})")
                else
                    RESULTS+=("FAIL $tool $name (exit $rc: ${summary:-no summary})")
                    STATUS=1
                    show_tail "$tool $name"
                fi
            done
        done
    fi
fi

# ---- benchmarks -------------------------------------------------------------------------
if [[ $RUN_BENCH == 1 ]]; then
    : >"$BENCH_LOG"
    export RADIO_KERNELS_BENCH_OUT="$LOG_DIR"
    # ceilings first: the other benchmarks report fractions of the ceilings it measures.
    benches=()
    [[ -f "$BUNDLE/benches/ceilings" ]] && benches+=("$BUNDLE/benches/ceilings")
    for bin in "$BUNDLE"/benches/*; do
        [[ "$(basename "$bin")" == ceilings ]] || benches+=("$bin")
    done
    for bin in ${benches[@]+"${benches[@]}"}; do
        [[ -x "$bin" && -f "$bin" ]] || continue
        name="$(basename "$bin")"
        echo "==== bench $name" | tee -a "$BENCH_LOG"
        run_captured "$bin" --bench
        rc=$?
        cat "$TMP/out" >>"$BENCH_LOG"
        if [[ $rc == 0 ]]; then
            RESULTS+=("PASS bench $name")
        else
            RESULTS+=("FAIL bench $name (exit $rc)")
            STATUS=1
            show_tail "bench $name"
        fi
    done
fi

# ---- summary ----------------------------------------------------------------------------
{
    echo
    echo "==== summary (passed/failed/ignored); logs in $LOG_DIR"
    for r in ${RESULTS[@]+"${RESULTS[@]}"}; do echo "$r"; done
    echo "gpu: $GPU_NAME"
    echo "gpu-tests: $TOTAL_PASSED passed, $TOTAL_FAILED failed, $TOTAL_IGNORED ignored"
} | tee -a "$TEST_LOG"
exit $STATUS
