#include "analyzer/cli/timeline_output.h"

#include <fmt/core.h>

#include <algorithm>
#include <limits>
#include <memory>


#include "analyzer/cli/load_progress.h"
#include "analyzer/errors.h"
#include "analyzer/export/chrome_json_writer.h"
#include "analyzer/export/perfetto_writer.h"
#include "analyzer/export/timeline_export.h"
#include "analyzer/report/units.h"
#include "proto/trace_writer.h"

namespace gpuxray::cli {
namespace {

using report::Unit;

// The Perfetto UI runs in the browser with about 2 GB; a trace takes 2-4x its size there.
constexpr uint64_t kLargeForTheUi = 1ull << 30;

std::string count(uint64_t n) {
  return report::formatValue(static_cast<double>(n), Unit::kCount);
}

}  // namespace

report::Stats writeTimelines(const analysis::Session& session, const report::Report& report,
                             const TimelineOutput& output, std::FILE* out) {
  if (!output.perfetto_path.empty() && output.perfetto_path == output.chrome_json_path)
    throw UsageError("--perfetto and --chrome-json name the same file");
  timeline::ExportOptions options;
  options.window = session.timelineWindow();

  std::unique_ptr<format::FileSink> perfetto_file, json_file;
  std::unique_ptr<timeline::PerfettoSink> perfetto;
  std::unique_ptr<timeline::ChromeJsonSink> json;
  std::vector<timeline::TimelineSink*> sinks;
  auto open = [](const std::string& path) {
    auto file = std::make_unique<format::FileSink>(path);
    if (!file->ok()) throw InputError(file->error());
    return file;
  };
  if (!output.perfetto_path.empty()) {
    perfetto_file = open(output.perfetto_path);
    perfetto = std::make_unique<timeline::PerfettoSink>(*perfetto_file);
    sinks.push_back(perfetto.get());
  }
  if (!output.chrome_json_path.empty()) {
    json_file = open(output.chrome_json_path);
    json = std::make_unique<timeline::ChromeJsonSink>(*json_file);
    sinks.push_back(json.get());
  }
  timeline::TeeSink tee(sinks);
  timeline::ExportSummary summary = timeline::exportTimeline(session.run(), report, options, tee);

  std::vector<std::string> files;
  if (perfetto) {
    files.push_back(fmt::format("{} (Perfetto, {})", output.perfetto_path,
                                report::formatValue(static_cast<double>(perfetto->bytesWritten()), Unit::kBytes)));
  }
  if (json) {
    files.push_back(fmt::format("{} (Chrome JSON, {})", output.chrome_json_path,
                                report::formatValue(static_cast<double>(json->bytesWritten()), Unit::kBytes)));
  }
  const auto& run = session.run();
  fmt::print(out,
             "gpuxray: wrote {}: {} of {} ranks, {} tracks, {} slices, {} instants, {} counter values, {} flows, {} "
             "findings\n",
             files.size() == 2 ? files[0] + " and " + files[1] : files[0], summary.ranks,
             std::max<size_t>(static_cast<size_t>(run.world_size), summary.ranks), count(summary.tracks),
             count(summary.slices), count(summary.instants), count(summary.counter_values), count(summary.flows),
             count(summary.findings));

  using report::Stat;
  report::Stats omitted;
  if (std::optional<analysis::Interval> window = session.window()) {
    auto at = [&](int64_t t) {
      return t == std::numeric_limits<int64_t>::max()
                 ? std::string("the end")
                 : report::formatValue(static_cast<double>(t - session.windowOriginNs()), Unit::kNanoseconds);
    };
    uint64_t outside = session.recordsOutsideWindow() + summary.outside_window;
    omitted.warn(Stat::export_outside_window, outside,
                 fmt::format("{} records outside {} to {} from the first GPU activity", count(outside),
                             at(window->start), at(window->end)));
  } else if (summary.outside_window > 0) {
    omitted.warn(Stat::export_outside_window, summary.outside_window,
                 fmt::format("{} records outside the steps asked for", count(summary.outside_window)));
  }
  if (summary.flows_unmatched > 0)
    omitted.warn(Stat::export_flows_unmatched, summary.flows_unmatched,
                 fmt::format("{} flows whose other end was not written", count(summary.flows_unmatched)));
  if (summary.flows_backwards > 0)
    omitted.warn(Stat::export_flows_backwards, summary.flows_backwards,
                 fmt::format("{} flows whose target ended before the source began", count(summary.flows_backwards)));
  if (summary.too_many_overlaps > 0)
    omitted.warn(Stat::export_overlaps_dropped, summary.too_many_overlaps,
                 fmt::format("{} slices overlapping more than 31 others on one track",
                             count(summary.too_many_overlaps)));
  std::vector<std::string> left_out;
  if (run.world_size > static_cast<int32_t>(run.ranks.size()))
    left_out.push_back(fmt::format("{} ranks not loaded", run.world_size - static_cast<int32_t>(run.ranks.size())));
  for (const auto& line : omitted.lines()) left_out.push_back(line.text);
  if (!left_out.empty()) {
    std::string line;
    for (const auto& item : left_out) line += (line.empty() ? "" : "; ") + item;
    fmt::print(out, "gpuxray: left out: {}\n", line);
  }
  if (perfetto && perfetto->bytesWritten() > kLargeForTheUi) {
    fmt::print(
        out,
        "gpuxray: {} is large for the Perfetto UI in a browser: open it through `trace_processor_shell --httpd {}`, "
        "or write less with --ranks, --window or --steps\n",
        output.perfetto_path, output.perfetto_path);
  }
  return omitted;
}

void exportRunTimeline(analysis::SessionOptions options, const TimelineOutput& output, std::FILE* out) {
  showLoadProgressOnTerminal(options);
  analysis::Session session(std::move(options));
  for (const auto& warning : session.warnings()) fmt::print(stderr, "gpuxray: warning: {}\n", warning);
  writeTimelines(session, session.analyze(), output, out);
}

}  // namespace gpuxray::cli
