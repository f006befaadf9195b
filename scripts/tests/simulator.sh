#!/usr/bin/env bash
# The engine's policy over 18,000 seeded simulated networks (docs/simulator.md): 1,000 scenarios of each
# of the 18 families, run by a release build of segget-sim (a debug build is ~20x slower). Fails when
# any scenario hangs, fails (or, in the family whose file cannot be finished, does not fail), takes longer than its family's bound times the ideal, makes more requests
# than its family's request bound, or sends a request before a refusal's wait was over.
# Usage: scripts/tests/simulator.sh [SEEDS-PER-FAMILY]        (default 1000)
source "$(dirname "$0")/../lib/common.sh"
cd "$ROOT"
seeds="${1:-1000}"
log "building segget-sim (release)"
swift build -c release --product segget-sim 2>&1 | grep -E "error|warning: " >&2 || true
swift build -c release --product segget-sim >/dev/null
log "simulating $seeds scenarios of each family"
.build/release/segget-sim --seeds "$seeds"
