// Inside the kernels: the counters `gpuxray run --kernel-metrics` measured, per kernel, with the
// roofline position, bound and findings (docs/analyses.md, "Kernel metrics").

#include "analyzer/analysis/kernel_metrics.h"

#include <fmt/core.h>

#include <algorithm>
#include <map>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/occupancy.h"
#include "analyzer/analysis/rank_digest.h"
#include "analyzer/model/kernel_names.h"

namespace gpuxray::analysis {
namespace {

using format::KernelMetricsRecord;
using report::Cell;
using report::ResultValue;
using report::Unit;
using Field = std::optional<double> KernelMetricsRecord::*;

// The fields in the trace record's order, with their JSON keys.
constexpr std::pair<const char*, Field> kFields[] = {
    {"achieved_occupancy_pct", &KernelMetricsRecord::achieved_occupancy_pct},
    {"sm_throughput_pct", &KernelMetricsRecord::sm_throughput_pct},
    {"tensor_pipe_pct", &KernelMetricsRecord::tensor_pipe_pct},
    {"dram_read_bytes", &KernelMetricsRecord::dram_read_bytes},
    {"dram_write_bytes", &KernelMetricsRecord::dram_write_bytes},
    {"l2_bytes", &KernelMetricsRecord::l2_bytes},
    {"l2_hit_rate_pct", &KernelMetricsRecord::l2_hit_rate_pct},
    {"l1_bytes", &KernelMetricsRecord::l1_bytes},
    {"l1_hit_rate_pct", &KernelMetricsRecord::l1_hit_rate_pct},
    {"shared_wavefronts", &KernelMetricsRecord::shared_wavefronts},
    {"local_load_bytes", &KernelMetricsRecord::local_load_bytes},
    {"local_store_bytes", &KernelMetricsRecord::local_store_bytes},
    {"gpu_duration_ns", &KernelMetricsRecord::gpu_duration_ns},
};

// Below this share of peak on both the SMs and DRAM, neither unit is what the kernel waits for.
constexpr double kBusyPct = 60.0;
// Achieved occupancy below this share of theoretical is the finding's threshold.
constexpr double kAchievedShare = 0.5;

const char* kMatrixOps[] = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear"};

std::vector<std::vector<double>> shapesOf(std::string_view inputs) {
  std::vector<std::vector<double>> shapes;
  size_t at = 0;
  while ((at = inputs.find('[', at)) != std::string_view::npos) {
    size_t end = inputs.find(']', at);
    if (end == std::string_view::npos) break;
    std::vector<double> dims;
    std::string_view body = inputs.substr(at + 1, end - at - 1);
    bool known = !body.empty();
    size_t start = 0;
    while (known && start <= body.size()) {
      size_t comma = body.find(',', start);
      std::string_view dim = body.substr(start, comma == std::string_view::npos ? body.npos : comma - start);
      while (!dim.empty() && dim.front() == ' ') dim.remove_prefix(1);
      double value = 0;
      for (char c : dim) {
        if (c < '0' || c > '9') known = false;
        value = value * 10 + (c - '0');
      }
      known = known && !dim.empty();
      dims.push_back(value);
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    if (known) shapes.push_back(std::move(dims));
    at = end + 1;
  }
  return shapes;
}

// The innermost matrix-product op open on the launching thread when the launch call began.
const model::HostOp* matrixOpOf(const model::RankTrace& rank, uint32_t correlation_id) {
  const model::HostCall* call = rank.launchOf(correlation_id);
  if (call == nullptr || call->thread >= rank.threads.size()) return nullptr;
  const uint64_t thread = rank.threads[call->thread];
  const model::HostOp* best = nullptr;
  auto end = std::upper_bound(rank.host_ops.begin(), rank.host_ops.end(), call->start_ns,
                              [](int64_t t, const model::HostOp& op) { return t < op.start_ns; });
  for (auto it = rank.host_ops.begin(); it != end; ++it) {
    if (it->thread_id != thread || it->end_ns < call->start_ns || it->inputs_id == 0) continue;
    std::string_view name = rank.name(it->name_id);
    if (std::find(std::begin(kMatrixOps), std::end(kMatrixOps), name) == std::end(kMatrixOps)) continue;
    if (best == nullptr || it->start_ns >= best->start_ns) best = &*it;
  }
  return best;
}

std::optional<double> median(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

std::string shortName(const std::string& name) {
  return model::reportedKernelName(name);
}

void classify(MeasuredKernel& k) {
  const auto& m = k.median;
  const double sm = m.sm_throughput_pct.value_or(-1);
  const double dram = k.dram_throughput_pct.value_or(-1);
  if (sm < 0 && dram < 0) {
    k.evidence.push_back("neither SM throughput nor DRAM throughput was measured: the bound is not known");
    return;
  }
  if (std::max(sm, dram) < kBusyPct) {
    k.bound = KernelBound::kLatency;
    k.evidence.push_back(
        fmt::format("neither unit is busy: SM throughput {:.1f} %, DRAM {:.1f} % of peak (both < {:.0f} %)",
                    std::max(sm, 0.0), std::max(dram, 0.0), kBusyPct));
    if (m.achieved_occupancy_pct)
      k.evidence.push_back(fmt::format("achieved occupancy {:.1f} %: too few warps in flight to hide latency",
                                       *m.achieved_occupancy_pct));
  } else if (dram >= sm) {
    k.bound = KernelBound::kMemory;
    k.evidence.push_back(
        fmt::format("DRAM throughput {:.1f} % of peak >= SM throughput {:.1f} %", dram, std::max(sm, 0.0)));
  } else {
    k.bound = KernelBound::kCompute;
    k.evidence.push_back(
        fmt::format("SM throughput {:.1f} % of peak > DRAM throughput {:.1f} %", sm, std::max(dram, 0.0)));
    if (m.tensor_pipe_pct)
      k.evidence.push_back(fmt::format("tensor pipe active {:.1f} % of cycles", *m.tensor_pipe_pct));
  }
  if (k.arithmetic_intensity && k.ridge_intensity) {
    k.evidence.push_back(fmt::format(
        "arithmetic intensity {:.1f} FLOP/byte, ridge point {:.1f}: {} side of the roofline", *k.arithmetic_intensity,
        *k.ridge_intensity, *k.arithmetic_intensity < *k.ridge_intensity ? "memory" : "compute"));
  } else if (k.arithmetic_intensity) {
    k.evidence.push_back(
        fmt::format("arithmetic intensity {:.1f} FLOP/byte (the device's peak FLOP/s is not recorded: "
                    "no ridge point)",
                    *k.arithmetic_intensity));
  } else {
    k.evidence.push_back("arithmetic intensity not known: " + k.flops_source);
  }
}

ResultValue optionalNumber(const std::optional<double>& v) {
  return v ? ResultValue::number(*v) : ResultValue();
}

ResultValue resultValue(const KernelMetricsResult& result) {
  ResultValue kernels = ResultValue::array();
  for (const auto& k : result.kernels) {
    ResultValue metrics = ResultValue::object();
    for (const auto& [key, field] : kFields) metrics.set(key, optionalNumber(k.median.*field));
    ResultValue evidence = ResultValue::array();
    for (const auto& line : k.evidence) evidence.push(ResultValue::text(line));
    kernels.push(ResultValue::object()
                     .set("name", ResultValue::text(k.name))
                     .set("launches", ResultValue::integer(static_cast<int64_t>(k.launches)))
                     .set("passes", ResultValue::integer(k.passes))
                     .set("metrics", std::move(metrics))
                     .set("theoretical_occupancy_pct", optionalNumber(k.theoretical_occupancy_pct))
                     .set("dram_throughput_pct", optionalNumber(k.dram_throughput_pct))
                     .set("flops", optionalNumber(k.flops))
                     .set("flops_source", ResultValue::text(k.flops_source))
                     .set("arithmetic_intensity", optionalNumber(k.arithmetic_intensity))
                     .set("ridge_intensity", optionalNumber(k.ridge_intensity))
                     .set("bound", k.bound == KernelBound::kUnknown ? ResultValue()
                                                                    : ResultValue::text(kernelBoundName(k.bound)))
                     .set("evidence", std::move(evidence)));
  }
  ResultValue fusion = ResultValue::array();
  for (const auto& f : result.fusion) {
    fusion.push(ResultValue::object()
                    .set("first", ResultValue::text(f.first))
                    .set("second", ResultValue::text(f.second))
                    .set("rank", ResultValue::integer(f.rank))
                    .set("device", ResultValue::integer(f.device))
                    .set("stream", ResultValue::integer(f.stream))
                    .set("first_written_bytes", ResultValue::number(f.first_written_bytes))
                    .set("second_read_bytes", ResultValue::number(f.second_read_bytes))
                    .set("bytes_saved", ResultValue::number(f.bytes_saved)));
  }
  return ResultValue::object()
      .set("profiled_launches", ResultValue::integer(static_cast<int64_t>(result.profiled_launches)))
      .set("launches_not_found", ResultValue::integer(static_cast<int64_t>(result.launches_not_found)))
      .set("kernels", std::move(kernels))
      .set("fusion_candidates", std::move(fusion));
}

}  // namespace

const char* kernelBoundName(KernelBound bound) {
  switch (bound) {
    case KernelBound::kMemory:
      return "memory-bound";
    case KernelBound::kCompute:
      return "compute-bound";
    case KernelBound::kLatency:
      return "latency-bound";
    case KernelBound::kUnknown:
      break;
  }
  return "not known";
}

bool isElementwiseKernel(std::string_view name) {
  for (std::string_view marker :
       {"elementwise_kernel", "vectorized_elementwise", "unrolled_elementwise", "triton_poi_"}) {
    if (name.find(marker) != std::string_view::npos) return true;
  }
  return false;
}

std::optional<double> gemmFlops(std::string_view op, std::string_view inputs) {
  auto shapes = shapesOf(inputs);
  auto product = [](const std::vector<double>& dims, size_t from, size_t to) {
    double p = 1;
    for (size_t i = from; i < to; ++i) p *= dims[i];
    return p;
  };
  if (op == "aten::linear") {
    // input [..., K], weight [N, K]
    if (shapes.size() < 2 || shapes[0].empty() || shapes[1].size() != 2 || shapes[0].back() != shapes[1][1])
      return std::nullopt;
    return 2 * product(shapes[0], 0, shapes[0].size() - 1) * shapes[1][1] * shapes[1][0];
  }
  // The last two inputs with a shape are the factors (addmm and baddbmm start with the addend).
  std::vector<std::vector<double>> factors;
  for (const auto& s : shapes)
    if (s.size() >= 2) factors.push_back(s);
  if (factors.size() < 2) return std::nullopt;
  const auto& a = factors[factors.size() - 2];
  const auto& b = factors.back();
  if (a.size() != b.size() || a.back() != b[b.size() - 2]) return std::nullopt;
  double batch = product(a, 0, a.size() - 2);
  return 2 * batch * a[a.size() - 2] * a.back() * b.back();
}

KernelMetricsPart kernelMetricsOfRank(const AnalysisInput& input, size_t r) {
  const model::RankTrace& rank = input.run.ranks[r];
  KernelMetricsPart part;
  const model::ProfiledKernel* previous = nullptr;
  for (const model::ProfiledKernel& p : rank.profiled_kernels) {
    KernelMetricsPart::Launch launch;
    launch.metrics = p.metrics;
    launch.found = p.launch_found;
    if (!p.launch_found) {
      part.launches.push_back(std::move(launch));
      continue;
    }
    launch.name = std::string(rank.name(p.launch.name_id));
    if (p.launch.detail < rank.launch_configs.size()) launch.shape = rank.launch_configs[p.launch.detail];
    for (const auto& d : rank.header.devices) {
      if (d.device_id == p.launch.device) launch.device = d.device_id;
    }
    if (const model::HostOp* op = matrixOpOf(rank, p.launch.correlation_id)) {
      std::string_view op_name = rank.name(op->name_id);
      launch.flops = gemmFlops(op_name, rank.name(op->inputs_id));
      launch.flops_source = launch.flops ? fmt::format("{} {}", op_name, rank.name(op->inputs_id))
                                         : fmt::format("{} with shapes {} that give no matrix product", op_name,
                                                       rank.name(op->inputs_id));
    } else {
      launch.flops_source = isElementwiseKernel(launch.name)
                                ? "an elementwise kernel: its FLOPs are not recorded"
                                : "no matrix-product op with recorded input shapes launched it";
    }
    // Consecutive on the stream: nothing else ran on it between the two.
    if (previous != nullptr && previous->launch.stream == p.launch.stream && isElementwiseKernel(launch.name) &&
        isElementwiseKernel(std::string(rank.name(previous->launch.name_id))) && previous->metrics.dram_write_bytes &&
        p.metrics.dram_read_bytes) {
      auto it = std::lower_bound(rank.activities.begin(), rank.activities.end(), previous->launch.start_ns,
                                 [](const model::GpuActivity& a, int64_t t) { return a.start_ns < t; });
      bool between = false;
      for (; it != rank.activities.end() && it->start_ns < p.launch.start_ns; ++it)
        between |= it->stream == p.launch.stream && model::isGpuWork(it->kind);
      double written = *previous->metrics.dram_write_bytes, read = *p.metrics.dram_read_bytes;
      if (!between && std::min(written, read) > 0) {
        const auto& key = rank.streams[p.launch.stream];
        part.fusion.push_back({std::string(rank.name(previous->launch.name_id)), launch.name, rank.rank, key.device,
                               key.stream, 2 * std::min(written, read), written, read});
      }
    }
    previous = &p;
    part.launches.push_back(std::move(launch));
  }
  return part;
}

KernelMetricsResult computeKernelMetrics(const AnalysisInput& input) {
  KernelMetricsResult result;
  struct Gathered {
    std::vector<const KernelMetricsPart::Launch*> launches;
    size_t first_rank = 0;  // the rank of launches.front()
  };
  std::map<std::string, Gathered> by_name;
  for (size_t r = 0; r < input.run.ranks.size(); ++r) {
    const KernelMetricsPart& part = input.digest(r).kernel_metrics;
    for (const auto& launch : part.launches) {
      if (!launch.found) {
        ++result.launches_not_found;
        continue;
      }
      ++result.profiled_launches;
      Gathered& gathered = by_name[launch.name];
      if (gathered.launches.empty()) gathered.first_rank = r;
      gathered.launches.push_back(&launch);
    }
    result.fusion.insert(result.fusion.end(), part.fusion.begin(), part.fusion.end());
  }
  for (auto& [name, gathered] : by_name) {
    MeasuredKernel k;
    k.name = name;
    k.launches = gathered.launches.size();
    const KernelMetricsPart::Launch& first = *gathered.launches.front();
    k.passes = first.metrics.passes;
    for (const auto& [key, field] : kFields) {
      std::vector<double> values;
      for (const auto* l : gathered.launches)
        if (l->metrics.*field) values.push_back(*(l->metrics.*field));
      k.median.*field = median(std::move(values));
    }
    // The part names its device by id (a digest read from a file holds no pointers into the run).
    const format::DeviceProperties* device = nullptr;
    if (first.device) {
      for (const auto& d : input.run.ranks[gathered.first_rank].header.devices)
        if (d.device_id == *first.device) device = &d;
    }
    if (device != nullptr && launchRecorded(first.shape) && first.shape.registers_per_thread > 0) {
      Occupancy o = theoreticalOccupancy(first.shape, *device);
      if (o.blocks_per_sm > 0) k.theoretical_occupancy_pct = 100.0 * o.occupancy;
    }
    const auto& m = k.median;
    std::optional<double> dram_bytes;
    if (m.dram_read_bytes || m.dram_write_bytes)
      dram_bytes = m.dram_read_bytes.value_or(0) + m.dram_write_bytes.value_or(0);
    if (dram_bytes && m.gpu_duration_ns && *m.gpu_duration_ns > 0 && device != nullptr &&
        device->memory_bandwidth_bytes_per_s > 0) {
      k.dram_throughput_pct =
          100.0 * *dram_bytes / (*m.gpu_duration_ns * 1e-9) / static_cast<double>(device->memory_bandwidth_bytes_per_s);
    }
    k.flops = first.flops;
    k.flops_source = first.flops_source;
    if (k.flops && dram_bytes && *dram_bytes > 0) k.arithmetic_intensity = *k.flops / *dram_bytes;
    if (device != nullptr && device->peak_bf16_flops > 0 && device->memory_bandwidth_bytes_per_s > 0)
      k.ridge_intensity = device->peak_bf16_flops / static_cast<double>(device->memory_bandwidth_bytes_per_s);
    classify(k);
    result.kernels.push_back(std::move(k));
  }
  std::sort(result.kernels.begin(), result.kernels.end(), [](const MeasuredKernel& a, const MeasuredKernel& b) {
    return a.median.gpu_duration_ns.value_or(0) > b.median.gpu_duration_ns.value_or(0);
  });
  return result;
}

void presentKernelMetrics(const KernelMetricsResult& result, report::Report& report) {
  if (result.profiled_launches == 0 && result.launches_not_found == 0) return;
  auto& section = report.addSection("kernel_metrics", "Inside the kernels (measured)");
  section.notes.push_back(fmt::format(
      "{} kernel launches measured with CUPTI's range profiler (--kernel-metrics); each was replayed once per pass, so "
      "their durations are left out of every time figure. Values are medians over a kernel's measured launches.",
      result.profiled_launches));
  report.addResult("kernel_metrics", [&] { return resultValue(result); });
  auto number = [](const std::optional<double>& v, Unit unit) {
    return v ? Cell::of(*v, unit) : Cell::of("not measured");
  };
  report::Table table{"measured_kernels",
                      "Measured kernels",
                      {{"kernel", "kernel"},
                       {"launches", "launches"},
                       {"duration", "duration"},
                       {"achieved_occupancy_pct", "achieved occ."},
                       {"theoretical_occupancy_pct", "theoretical occ."},
                       {"sm_throughput_pct", "SM"},
                       {"tensor_pipe_pct", "tensor"},
                       {"dram_bytes", "DRAM bytes"},
                       {"dram_throughput_pct", "DRAM"},
                       {"l2_hit_rate_pct", "L2 hit"},
                       {"l1_hit_rate_pct", "L1 hit"},
                       {"spill_bytes", "spill bytes"},
                       {"bound", "bound"}},
                      {}};
  for (const auto& k : result.kernels) {
    const auto& m = k.median;
    std::optional<double> dram;
    if (m.dram_read_bytes || m.dram_write_bytes) dram = m.dram_read_bytes.value_or(0) + m.dram_write_bytes.value_or(0);
    std::optional<double> spill;
    if (m.local_load_bytes || m.local_store_bytes)
      spill = m.local_load_bytes.value_or(0) + m.local_store_bytes.value_or(0);
    table.rows.push_back(
        {Cell::of(shortName(k.name)), Cell::of(static_cast<double>(k.launches), Unit::kCount),
         number(m.gpu_duration_ns, Unit::kNanoseconds), number(m.achieved_occupancy_pct, Unit::kPercent),
         k.theoretical_occupancy_pct ? Cell::of(*k.theoretical_occupancy_pct, Unit::kPercent)
                                     : Cell::of("not estimated"),
         number(m.sm_throughput_pct, Unit::kPercent), number(m.tensor_pipe_pct, Unit::kPercent),
         number(dram, Unit::kBytes),
         k.dram_throughput_pct ? Cell::of(*k.dram_throughput_pct, Unit::kPercent) : Cell::of("not known"),
         number(m.l2_hit_rate_pct, Unit::kPercent), number(m.l1_hit_rate_pct, Unit::kPercent),
         number(spill, Unit::kBytes), Cell::of(kernelBoundName(k.bound))});
  }
  section.tables.push_back(std::move(table));
  if (result.launches_not_found > 0) {
    section.notes.push_back(fmt::format("{} measured launches have no kernel record in the trace: they are not shown.",
                                        result.launches_not_found));
  }

  // Findings: the longest measured kernels whose SMs hold far fewer warps than the launch allows.
  size_t reported = 0;
  for (const auto& k : result.kernels) {
    if (reported == 3) break;
    const auto& achieved = k.median.achieved_occupancy_pct;
    if (!achieved || !k.theoretical_occupancy_pct || *achieved >= kAchievedShare * *k.theoretical_occupancy_pct)
      continue;
    report::Finding finding;
    finding.analysis = "kernel_metrics";
    finding.severity = report::Severity::kWarning;
    finding.cost_ns = k.median.gpu_duration_ns.value_or(0) * (1.0 - *achieved / *k.theoretical_occupancy_pct);
    finding.summary = fmt::format("kernel {} reaches {:.1f} % achieved occupancy of {:.1f} % theoretical",
                                  shortName(k.name), *achieved, *k.theoretical_occupancy_pct);
    finding.evidence.push_back(
        "the SMs hold fewer warps than the launch allows: a partial last wave, blocks of unequal work, or a kernel "
        "too short for the SMs to fill");
    finding.evidence.insert(finding.evidence.end(), k.evidence.begin(), k.evidence.end());
    report.findings.push_back(std::move(finding));
    ++reported;
  }
  for (const auto& f : result.fusion) {
    report::Finding finding;
    finding.analysis = "kernel_metrics";
    finding.severity = report::Severity::kInfo;
    // Not a time: the bytes are what it saves; cost stays 0 rather than a guessed duration.
    finding.summary =
        fmt::format("fusion candidate on rank {} stream {}: {} then {} move {} through HBM twice", f.rank, f.stream,
                    shortName(f.first), shortName(f.second), report::formatValue(f.bytes_saved / 2, Unit::kBytes));
    finding.evidence.push_back(fmt::format("the first writes {}, the second reads {} right after it on the same stream",
                                           report::formatValue(f.first_written_bytes, Unit::kBytes),
                                           report::formatValue(f.second_read_bytes, Unit::kBytes)));
    finding.evidence.push_back(fmt::format("fusing them would save {} of HBM traffic per launch pair",
                                           report::formatValue(f.bytes_saved, Unit::kBytes)));
    report.findings.push_back(std::move(finding));
  }
}

void analyzeKernelMetrics(const AnalysisInput& input, report::Report& report) {
  presentKernelMetrics(computeKernelMetrics(input), report);
}

}  // namespace gpuxray::analysis
