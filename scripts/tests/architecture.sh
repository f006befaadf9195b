#!/usr/bin/env bash
# The architecture rules of issue 15 hold on Sources/ (see scripts/check-architecture).
exec "$(dirname "$0")/../check-architecture"
