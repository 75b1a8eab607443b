// The ranks of a run read from PyTorch-profiler traces: a trace without distributedInfo gets the rank
// its file name gives ("..._rank-3.json.gz") or the first free one; of two traces with the same rank
// the first (by file name) is kept. Each decision is a warning naming the file, counted in `stats`.
#pragma once

#include <string>
#include <vector>

#include "analyzer/model/run_trace.h"

namespace gpuxray::load {

void settleKinetoRanks(std::vector<model::RankTrace>& ranks, std::vector<std::string>& warnings, report::Stats& stats);

}  // namespace gpuxray::load
