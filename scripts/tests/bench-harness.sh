#!/usr/bin/env bash
# The benchmark harness's own unit tests (output checks, parsing, tables): Python standard library only.
source "$(dirname "$0")/../lib/common.sh"
cd "$ROOT"
python3 -B -m unittest discover -s Benchmarks/harness -p 'test_*.py'
