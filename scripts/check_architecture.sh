#!/usr/bin/env bash
# The dependency rules of ARCHITECTURE.md, checked on the sources:
# - inject/ and analyzer/ depend on proto/, never on each other;
# - code that runs inside the traced process (inject/ and proto/'s writer) includes neither
#   libprotobuf nor fmt, which would clash with the copies inside PyTorch and friends.
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
violation() { echo "architecture: $1"; status=1; }

while IFS= read -r line; do violation "inject/ includes analyzer/: $line"; done \
  < <(grep -rn '#include "analyzer/' inject/ 2>/dev/null)
while IFS= read -r line; do violation "analyzer/ includes inject/: $line"; done \
  < <(grep -rn '#include "inject/' analyzer/ 2>/dev/null)
writer_side=(inject proto/file_layout.h proto/file_layout.cc proto/records.h proto/records.cc
             proto/wire_encoder.h proto/trace_writer.h proto/trace_writer.cc)
while IFS= read -r line; do violation "in-process code includes protobuf or fmt: $line"; done \
  < <(grep -rnE '#include [<"](google/protobuf|fmt/|.*\.pb\.h)' "${writer_side[@]}" 2>/dev/null)

[[ $status -eq 0 ]] && echo "architecture: inject/ and analyzer/ are independent; in-process code is free of protobuf and fmt"
exit $status
