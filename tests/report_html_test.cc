// The X-ray's page as gpuxray writes it (analyzer/report/html_report.h): the report's JSON inline in
// one versioned block that no text of the trace can end early, the bundled script, and the commands
// that write it. What the page draws is tested in a browser (web/test/browser_test.mjs).

#include <catch2/catch.hpp>
#include <string>

#include "analyzer/errors.h"
#include "analyzer/report/html_report.h"
#include "analyzer/report/report.h"
#include "tests/support/build_outputs.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using gpuxray::testing::readWholeFile;
using gpuxray::testing::runCommand;
using gpuxray::testing::TempDir;

std::string dataBlockOf(const std::string& page) {
  std::string open = "<script type=\"application/json\" id=\"gpuxray-data\" data-version=\"" +
                     std::to_string(gpuxray::report::kHtmlDataVersion) + "\">";
  size_t begin = page.find(open);
  if (begin == std::string::npos) return {};
  begin += open.size();
  return page.substr(begin, page.find("</script>", begin) - begin);
}

}  // namespace

TEST_CASE("the HTML page embeds the JSON so that no string in it ends the script element", "[html]") {
  if (!gpuxray::report::htmlReportAvailable()) {
    REQUIRE_THROWS_AS(gpuxray::report::renderHtml("{}", "t"), gpuxray::InputError);
    WARN("skipped: built without web/ (" << gpuxray::report::htmlReportUnavailableReason() << ")");
    return;
  }
  gpuxray::report::Report report;
  report.run.run_id = "run</script><script>alert(1)</script>";
  report.warnings.push_back("kernel <!-- name & more");
  std::string json = gpuxray::report::renderJson(report);
  std::string page = gpuxray::report::renderHtml(json, "X-ray of <b>" + report.run.run_id);
  std::string block = dataBlockOf(page);
  REQUIRE_FALSE(block.empty());
  CHECK(block.find('<') == std::string::npos);
  CHECK(block.find("run\\u003c/script>\\u003cscript>alert(1)\\u003c/script>") != std::string::npos);
  CHECK(block.find("kernel \\u003c!-- name & more") != std::string::npos);
  CHECK(page.find("<title>X-ray of &lt;b&gt;run&lt;/script&gt;") != std::string::npos);
  // Data block, then the script, each closed once: "<script" occurs exactly twice in the page.
  size_t scripts = 0;
  for (size_t at = page.find("<script"); at != std::string::npos; at = page.find("<script", at + 1)) ++scripts;
  CHECK(scripts == 2);
  CHECK(page.find("http://") == std::string::npos);
  CHECK(page.find("https://cdn") == std::string::npos);
}

TEST_CASE("gpuxray report and analyze --html write the same page; bad input is one line", "[html][cli]") {
  if (!gpuxray::report::htmlReportAvailable()) {
    auto result = runCommand(gpuxray::testing::gpuxrayBinary() + " report /nonexistent -o /dev/null");
    CHECK(result.exit_code != 0);
    CHECK(result.err.find("scripts/setup.sh") != std::string::npos);
    return;
  }
  TempDir dir;
  std::string gpuxray = gpuxray::testing::gpuxrayBinary();
  REQUIRE(runCommand(gpuxray + " simulate --preset demo -o " + (dir / "demo")).exit_code == 0);
  auto reported = runCommand(gpuxray + " report " + (dir / "demo") + " -o " + (dir / "report.html"));
  REQUIRE(reported.exit_code == 0);
  auto analyzed = runCommand(gpuxray + " analyze " + (dir / "demo") + " --html " + (dir / "analyze.html"));
  REQUIRE(analyzed.exit_code == 0);
  CHECK(analyzed.out.find("slow link") != std::string::npos);  // the text report, in the same pass
  std::string from_report = dataBlockOf(readWholeFile(dir / "report.html"));
  CHECK(from_report.find("\"schema\":\"gpuxray.analyze\"") != std::string::npos);  // compact: no indentation
  CHECK(from_report.find("\"results\"") != std::string::npos);
  CHECK(from_report == dataBlockOf(readWholeFile(dir / "analyze.html")));

  auto empty = runCommand(gpuxray + " report " + dir.path().string() + "/nothing -o " + (dir / "x.html"));
  CHECK(empty.exit_code != 0);
  CHECK(empty.err.find('\n') == empty.err.size() - 1);
  auto unwritable = runCommand(gpuxray + " report " + (dir / "demo") + " -o /nonexistent/dir/x.html");
  CHECK(unwritable.exit_code == 2);
  CHECK(unwritable.err.find("/nonexistent/dir/x.html: cannot write the HTML report") != std::string::npos);

  auto plan =
      runCommand(gpuxray + " plan --model gpt-1.3b --cluster dgx-h100 --gpus 16 --top 3 --html " + (dir / "plan.html"));
  REQUIRE(plan.exit_code == 0);
  CHECK(dataBlockOf(readWholeFile(dir / "plan.html")).find("\"gpuxray.plan\"") != std::string::npos);
}

TEST_CASE("a large run's page keeps the memory curves of the highest peaks and says what it left out", "[html]") {
  using gpuxray::report::ResultValue;
  gpuxray::report::Report report;
  ResultValue devices = ResultValue::array();
  for (int rank = 0; rank < 100; ++rank) {
    ResultValue curve = ResultValue::array();
    curve.push(ResultValue::array().push(ResultValue::integer(0)).push(ResultValue::integer(rank)));
    devices.push(ResultValue::object()
                     .set("rank", ResultValue::integer(rank))
                     .set("peak_bytes", ResultValue::integer((rank * 37) % 100))
                     .set("curve", std::move(curve)));
  }
  report.results.emplace_back("memory", ResultValue::object().set("devices", std::move(devices)));
  gpuxray::report::Section memory_section{"memory", "Memory", {"a note"}, {{}}};
  memory_section.tables[0].rows.resize(3);
  report.sections.push_back(memory_section);
  gpuxray::report::Report fitted = gpuxray::report::fitForPage(report);
  const ResultValue& kept = fitted.results.front().second;
  size_t with_curve = 0;
  for (const ResultValue& device : kept.find("devices")->items()) {
    bool has_curve = device.find("curve")->kind() == ResultValue::Kind::kArray;
    with_curve += has_curve ? 1 : 0;
    // The 32 highest peaks of 0..99 (each once) are 68..99.
    CHECK(has_curve == (device.find("peak_bytes")->asInteger() >= 68));
  }
  CHECK(with_curve == 32);
  REQUIRE(fitted.results.back().first == "html_page");
  const auto& lines = fitted.results.back().second.find("left_out")->items();
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].asText() == "68 of 100 devices' memory curves (the page keeps those of the 32 highest peaks)");
  // The page draws the typed results, not the text report's tables: those go, the section's notes stay.
  CHECK(lines[1].asText() == "the text report's tables (3 rows; `gpuxray analyze` prints them)");
  REQUIRE(fitted.sections.size() == 1);
  CHECK(fitted.sections[0].tables.empty());
  CHECK(fitted.sections[0].notes == std::vector<std::string>{"a note"});
  // A small run's page is the report as it is.
  gpuxray::report::Report small;
  small.results.emplace_back("memory", ResultValue::object().set("devices", ResultValue::array()));
  small.sections.push_back(memory_section);
  CHECK(gpuxray::report::fitForPage(small).results.size() == 1);
  CHECK(gpuxray::report::fitForPage(small).sections[0].tables.size() == 1);
}

TEST_CASE("a large run's step overview keeps ranks spread over the whole run, not the first ones", "[html]") {
  using gpuxray::report::ResultValue;
  gpuxray::report::Report report;
  ResultValue ranks = ResultValue::array();
  // Rank 0 has 20 exposed stretches, the i-th [100 i, 100 i + (i % 7) + 1]: the 16 longest leave out
  // the three of length 1 (i = 0, 7, 14) and, of the three of length 2 (i = 1, 8, 15), the last in time.
  ResultValue exposed = ResultValue::array();
  for (int i = 0; i < 20; ++i)
    exposed.push(ResultValue::object().set(
        "span_ns",
        ResultValue::array().push(ResultValue::integer(100 * i)).push(ResultValue::integer(100 * i + i % 7 + 1))));
  ranks.push(ResultValue::object()
                 .set("rank", ResultValue::integer(0))
                 .set("exposed", std::move(exposed))
                 .set("exposed_left_out", ResultValue::integer(5)));
  for (int rank = 1; rank < 1000; ++rank) ranks.push(ResultValue::object().set("rank", ResultValue::integer(rank)));
  report.results.emplace_back("step_overview", ResultValue::object().set("ranks", std::move(ranks)));
  gpuxray::report::Report fitted = gpuxray::report::fitForPage(report);
  const auto& kept = fitted.results.front().second.find("ranks")->items();
  REQUIRE(kept.size() == 256);
  // Item floor(i * 1000 / 256): 0, 3 (3.9), 7 (7.8), ..., 996 (255 * 1000 / 256 = 996.1).
  CHECK(kept[0].find("rank")->asInteger() == 0);
  CHECK(kept[1].find("rank")->asInteger() == 3);
  CHECK(kept[2].find("rank")->asInteger() == 7);
  CHECK(kept[255].find("rank")->asInteger() == 996);
  const auto& marks = kept[0].find("exposed")->items();
  REQUIRE(marks.size() == 16);
  std::vector<int64_t> starts;
  for (const ResultValue& mark : marks) starts.push_back(mark.find("span_ns")->items()[0].asInteger());
  // Lengths by i: 1 2 3 4 5 6 7 1 2 3 4 5 6 7 1 2 3 4 5 6; dropped: i = 0, 7, 14 (length 1) and 15 (length 2).
  CHECK(starts ==
        std::vector<int64_t>{100, 200, 300, 400, 500, 600, 800, 900, 1000, 1100, 1200, 1300, 1600, 1700, 1800, 1900});
  CHECK(kept[0].find("exposed_left_out")->asInteger() == 5 + 4);
  REQUIRE(fitted.results.back().first == "html_page");
  const auto& lines = fitted.results.back().second.find("left_out")->items();
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].asText() == "744 of 1000 ranks of the step overview (the page draws 256 spread evenly over them)");
  CHECK(lines[1].asText() ==
        "4 of the drawn ranks' exposed-communication stretches (the page keeps each rank's 16 longest)");
}

TEST_CASE("a long run's page leaves out the per-rank per-step figures no view draws, past 65,536 rank-steps",
          "[html]") {
  using gpuxray::report::ResultValue;
  // `ranks` ranks of `steps` steps: the time breakdown's and the overlap's steps per rank, the
  // stragglers' ranks per step.
  auto reportOf = [](int ranks, int steps) {
    gpuxray::report::Report report;
    ResultValue breakdown = ResultValue::array(), overlap = ResultValue::array(), waits = ResultValue::array();
    for (int r = 0; r < ranks; ++r) {
      ResultValue per_step = ResultValue::array();
      for (int s = 0; s < steps; ++s) per_step.push(ResultValue::object().set("step", ResultValue::integer(s)));
      breakdown.push(ResultValue::object()
                         .set("rank", ResultValue::integer(r))
                         .set("host", ResultValue::text("h"))
                         .set("steps", per_step));
      overlap.push(ResultValue::object().set("rank", ResultValue::integer(r)).set("steps", std::move(per_step)));
    }
    for (int s = 0; s < steps; ++s) {
      ResultValue of_ranks = ResultValue::array();
      for (int r = 0; r < ranks; ++r) of_ranks.push(ResultValue::integer(r));
      waits.push(ResultValue::object().set("step", ResultValue::integer(s)).set("ranks", std::move(of_ranks)));
    }
    report.results.emplace_back("time_breakdown", ResultValue::object().set("ranks", std::move(breakdown)));
    report.results.emplace_back("overlap", ResultValue::object().set("ranks", std::move(overlap)));
    report.results.emplace_back("stragglers", ResultValue::object().set("steps", std::move(waits)));
    return gpuxray::report::fitForPage(std::move(report));
  };
  // 256 x 256 = 65,536: kept whole, no html_page.
  gpuxray::report::Report kept = reportOf(256, 256);
  REQUIRE(kept.results.size() == 3);
  CHECK(kept.results[0].second.find("ranks")->items()[0].find("steps")->items().size() == 256);
  // 257 x 256: each left out (null), the ranks' own fields kept, one line each.
  gpuxray::report::Report cut = reportOf(257, 256);
  REQUIRE(cut.results.size() == 4);
  const ResultValue& rank = cut.results[0].second.find("ranks")->items()[0];
  CHECK(rank.find("steps")->kind() == ResultValue::Kind::kNull);
  CHECK(rank.find("host")->asText() == "h");
  CHECK(cut.results[1].second.find("ranks")->items()[5].find("steps")->kind() == ResultValue::Kind::kNull);
  CHECK(cut.results[2].second.find("steps")->kind() == ResultValue::Kind::kNull);
  const auto& lines = cut.results.back().second.find("left_out")->items();
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].asText() == "the time breakdown's figures, per rank and step (65792 rank-steps; no view draws them)");
  CHECK(lines[2].asText() == "the stragglers' waits, per rank and step (65792 rank-steps; no view draws them)");
}
