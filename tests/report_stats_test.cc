// The stats registry (analyzer/report/stats.h): every name registered once, documented and used;
// each source of stats (a capture's trailer, a damaged PyTorch-profiler trace, the timeline export)
// counted under its name and shown the same way in the text and JSON reports, and every warning line
// under one stat.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "analyzer/load/run_loader.h"
#include "analyzer/report/report.h"
#include "analyzer/report/stats.h"
#include "proto/trace_writer.h"
#include "support/run_builder.h"
#include "support/run_command.h"
#include "support/temp_dir.h"
#include "tests/support/build_outputs.h"

namespace {

using gpuxray::report::Stat;
using gpuxray::report::StatSeverity;
namespace format = gpuxray::format;
using gpuxray::testing::TempDir;

std::string sourceFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Every `Stat::name` written in the analyzer's sources.
std::set<std::string> statNamesInCode() {
  std::set<std::string> names;
  const std::regex use(R"(\bStat::([A-Za-z_0-9]+))");
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(std::filesystem::path(GPUXRAY_SOURCE_DIR) / "analyzer")) {
    if (!entry.is_regular_file() || (entry.path().extension() != ".cc" && entry.path().extension() != ".h")) continue;
    std::string text = sourceFile(entry.path());
    for (auto it = std::sregex_iterator(text.begin(), text.end(), use); it != std::sregex_iterator(); ++it)
      names.insert((*it)[1].str());
  }
  return names;
}

struct Analyzed {
  std::string text;
  nlohmann::json json;
  std::string err;
};

Analyzed analyze(const std::string& arguments) {
  const std::string gpuxray = gpuxray::testing::gpuxrayBinary();
  auto text = gpuxray::testing::runCommand(gpuxray + " analyze " + arguments);
  INFO(text.err);
  REQUIRE(text.exit_code == 0);
  auto json = gpuxray::testing::runCommand(gpuxray + " analyze --format json " + arguments);
  REQUIRE(json.exit_code == 0);
  return {text.out, nlohmann::json::parse(json.out), text.err};
}

const nlohmann::json* statEntry(const nlohmann::json& report, const std::string& name) {
  for (const auto& entry : report.at("stats")) {
    if (entry.at("name") == name) return &entry;
  }
  return nullptr;
}

// The row of the text report's stats table: name, severity and count, space-aligned.
bool textShows(const std::string& text, const std::string& name, const std::string& severity,
               const std::string& count) {
  return std::regex_search(text, std::regex("\\n +" + name + " +" + severity + " +" + count + "  "));
}

// Every line under "warnings" in the JSON report is one stat's line.
void checkEveryWarningHasItsStat(const nlohmann::json& report) {
  std::multiset<std::string> under_stats;
  for (const auto& entry : report.at("stats"))
    for (const auto& line : entry.at("warnings")) under_stats.insert(line.get<std::string>());
  for (const auto& line : report.at("warnings")) {
    INFO(line);
    CHECK(under_stats.contains(line.get<std::string>()));
  }
}

}  // namespace

TEST_CASE("stats: every stat has one snake_case name, a severity and a description", "[stats]") {
  std::set<std::string_view> names;
  for (const auto& info : gpuxray::report::kStatInfo) {
    INFO(info.name);
    CHECK(std::regex_match(std::string(info.name), std::regex("[a-z][a-z0-9_]*")));
    CHECK(names.insert(info.name).second);
    CHECK(!info.description.empty());
    CHECK(gpuxray::report::statNamed(info.name).has_value());
  }
  CHECK(!gpuxray::report::statNamed("no_such_stat").has_value());
  CHECK(std::string(gpuxray::report::statSeverityName(StatSeverity::kDataLoss)) == "data_loss");
}

TEST_CASE("stats: every stat named in the code is registered, used and documented", "[stats]") {
  const std::set<std::string> used = statNamesInCode();
  for (const auto& name : used) {
    INFO("Stat::" << name << " in analyzer/");
    CHECK(gpuxray::report::statNamed(name).has_value());
  }
  const std::string schema = sourceFile(std::filesystem::path(GPUXRAY_SOURCE_DIR) / "docs" / "report-schema.md");
  for (const auto& info : gpuxray::report::kStatInfo) {
    std::string name(info.name);
    INFO(name);
    CHECK(used.contains(name));
    CHECK(schema.find("| `" + name + "` | " + gpuxray::report::statSeverityName(info.severity) + " |") !=
          std::string::npos);
  }
}

TEST_CASE("stats: Stats counts, keeps each line under its stat and merges", "[stats]") {
  gpuxray::report::Stats a;
  a.add(Stat::trace_bytes_skipped, 100);
  a.warn(Stat::files_skipped, 1, "x: skipped");
  gpuxray::report::Stats b;
  b.warn(Stat::files_skipped, 2, "y: skipped");
  a.merge(b);
  CHECK(a.value(Stat::files_skipped) == 3);
  CHECK(a.value(Stat::trace_bytes_skipped) == 100);
  CHECK(a.value(Stat::ranks_missing) == 0);
  CHECK(a.nonZero() == std::vector<Stat>{Stat::trace_bytes_skipped, Stat::files_skipped});
  CHECK(a.linesOf(Stat::files_skipped) == std::vector<std::string>{"x: skipped", "y: skipped"});
}

TEST_CASE("stats: a trailer's dropped records are capture_records_dropped, in text and JSON", "[stats]") {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "run");
  gpuxray::testing::RunBuilder run("stats-drops", 2);
  run.rank(0, "node-a").kernel("gemm", 10, 20);
  run.write(dir.path() / "run");
  // A second file written by hand: the same run, rank 1 of 2, with drops in its trailer.
  {
    format::TraceWriter writer(std::make_unique<format::FileSink>(dir / "run/rank-00001.gpuxray"));
    format::FileHeader header;
    header.run_id = "stats-drops";
    header.rank = 1;
    header.world_size = 2;
    header.hostname = "node-a";
    header.time_base = "generated";
    writer.writeHeader(header);
    format::KernelRecord kernel;
    kernel.start_ns = gpuxray::testing::kRunStartNs + 10'000;
    kernel.end_ns = kernel.start_ns + 5'000;
    kernel.name_id = writer.intern("gemm");
    writer.add(kernel);
    format::Trailer trailer;
    trailer.end = format::CaptureEnd::kProcessExit;
    trailer.counts = {{format::Category::kKernel, 0, 1234}, {format::Category::kNcclOperation, 0, 6}};
    trailer.warnings = {"NCCL operation pool full on communicator 0x1"};
    REQUIRE(writer.finish(trailer));
  }
  Analyzed a = analyze(dir / "run");
  INFO(a.text);
  CHECK(textShows(a.text, "capture_records_dropped", "data_loss", "1,240"));
  CHECK(textShows(a.text, "capture_warnings", "info", "1"));
  const nlohmann::json* dropped = statEntry(a.json, "capture_records_dropped");
  REQUIRE(dropped != nullptr);
  CHECK(dropped->at("severity") == "data_loss");
  CHECK(dropped->at("value") == 1240);
  CHECK(dropped->at("description") ==
        std::string(gpuxray::report::statInfo(Stat::capture_records_dropped).description));
  REQUIRE(dropped->at("warnings").size() == 2);
  CHECK(dropped->at("warnings")[0].get<std::string>().ends_with(
      "rank-00001.gpuxray: 1234 kernel records were dropped during capture"));
  const nlohmann::json* warned = statEntry(a.json, "capture_warnings");
  REQUIRE(warned != nullptr);
  CHECK(warned->at("warnings")[0].get<std::string>().ends_with(
      "rank-00001.gpuxray: the capture warned: NCCL operation pool full on communicator 0x1"));
  checkEveryWarningHasItsStat(a.json);
}

TEST_CASE("stats: a damaged PyTorch-profiler trace counts its skipped events, in text and JSON", "[stats]") {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "run");
  auto kernel = [](const std::string& name, int ts, int correlation) {
    return R"({"ph": "X", "cat": "kernel", "name": ")" + name + R"(", "pid": 0, "tid": 7, "ts": )" +
           std::to_string(ts) + R"(, "dur": 5, "args": {"device": 0, "stream": 7, "correlation": )" +
           std::to_string(correlation) + "}}";
  };
  // Two malformed events, one kernel without a duration, one event of an unknown category, and the
  // file cut off inside traceEvents.
  std::string text =
      R"({"distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents": [)" + kernel("k1", 20, 1) +
      R"(, {"ph": "X", "cat": "kernel" "name": "broken"}, 17, )" +
      R"({"ph": "X", "cat": "kernel", "name": "k2", "pid": 0, "tid": 7, "ts": 30, )" +
      R"("args": {"device": 0, "stream": 7}}, )" +
      R"({"ph": "X", "cat": "mystery", "name": "m", "pid": 0, "tid": 7, "ts": 31, "dur": 1}, )" + kernel("k3", 40, 2) +
      ", " + kernel("k4", 50, 3);
  std::ofstream(dir.path() / "run" / "trainer_rank-0.json") << text;
  Analyzed a = analyze(dir / "run");
  INFO(a.text);
  CHECK(textShows(a.text, "kineto_events_malformed", "data_loss", "2"));
  CHECK(textShows(a.text, "kineto_events_missing_fields", "data_loss", "1"));
  CHECK(textShows(a.text, "kineto_events_unknown_category", "info", "1"));
  CHECK(textShows(a.text, "kineto_traces_truncated", "data_loss", "1"));
  for (auto [name, severity, value] : {std::tuple{"kineto_events_malformed", "data_loss", 2},
                                       std::tuple{"kineto_events_missing_fields", "data_loss", 1},
                                       std::tuple{"kineto_events_unknown_category", "info", 1},
                                       std::tuple{"kineto_traces_truncated", "data_loss", 1}}) {
    INFO(name);
    const nlohmann::json* entry = statEntry(a.json, name);
    REQUIRE(entry != nullptr);
    CHECK(entry->at("severity") == severity);
    CHECK(entry->at("value") == value);
    REQUIRE(entry->at("warnings").size() == 1);
    CHECK(entry->at("warnings")[0].get<std::string>().find("trainer_rank-0.json: ") != std::string::npos);
  }
  checkEveryWarningHasItsStat(a.json);
}

TEST_CASE("stats: flows the timeline export leaves out are export_flows_unmatched, in text and JSON", "[stats]") {
  TempDir dir;
  gpuxray::testing::RunBuilder run("stats-export", 2);
  constexpr uint64_t kComm = 0x5eed;
  for (int r = 0; r < 2; ++r) {
    auto& rank = run.rank(r, "node-a", r);
    rank.communicator(kComm, "pp", r, 2, 1).kernel("gemm", 10, 20);
    rank.p2p(kComm, r == 0, 1 - r, 30, 40, 1 << 20);
  }
  run.write(dir.path() / "run");
  // Rank 0 alone: the arrow of its send has no receive to end at.
  Analyzed a = analyze(dir / "run" + " --ranks 0 --perfetto " + dir / "t.pftrace");
  INFO(a.text);
  INFO(a.err);
  CHECK(a.err.find("gpuxray: left out: 1 ranks not loaded; 1 flows whose other end was not written") !=
        std::string::npos);
  CHECK(textShows(a.text, "export_flows_unmatched", "info", "1"));
  const nlohmann::json* entry = statEntry(a.json, "export_flows_unmatched");
  REQUIRE(entry != nullptr);
  CHECK(entry->at("severity") == "info");
  CHECK(entry->at("value") == 1);
  CHECK(entry->at("warnings") == nlohmann::json::array({"1 flows whose other end was not written"}));
  checkEveryWarningHasItsStat(a.json);
}

TEST_CASE("stats: a clean run has an empty stats array and no stats table", "[stats]") {
  TempDir dir;
  gpuxray::testing::RunBuilder run("stats-clean", 1);
  run.rank(0, "node-a").kernel("gemm", 10, 20);
  run.write(dir.path() / "run");
  Analyzed a = analyze(dir / "run");
  CHECK(a.json.at("stats") == nlohmann::json::array());
  CHECK(a.text.find("\nStats (") == std::string::npos);
}
