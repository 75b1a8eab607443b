// README.md shows what the demo prints; these tests run the commands it shows and compare, so a change
// that alters the demo's output must also update the README.

#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "tests/support/build_outputs.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using gpuxray::testing::runCommand;
using gpuxray::testing::TempDir;

std::vector<std::string> linesOf(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The lines of the README's code block that follows the line "$ COMMAND", up to the closing fence or
// a line "  ..." (the README shows only the start of a long output).
std::vector<std::string> readmeOutputOf(const std::string& command) {
  std::vector<std::string> readme = linesOf(gpuxray::testing::readWholeFile(std::string(GPUXRAY_SOURCE_DIR) + "/README.md"));
  std::vector<std::string> shown;
  for (size_t i = 0; i < readme.size(); ++i) {
    if (readme[i] != "$ " + command) continue;
    for (size_t j = i + 1; j < readme.size() && readme[j] != "```" && readme[j] != "  ..."; ++j) shown.push_back(readme[j]);
    break;
  }
  return shown;
}

// Runs `command` as README shows it, with build/gpuxray standing for the binary under test and out/demo
// for a scratch copy of the demo run, and checks that its output starts with the README's lines.
void checkReadmeBlock(const std::string& command, const std::string& demo_dir) {
  std::vector<std::string> shown = readmeOutputOf(command);
  INFO("README.md block of `$ " << command << "`");
  REQUIRE(!shown.empty());
  std::string actual_command = command;
  auto replace = [&](const std::string& from, const std::string& to) {
    for (size_t at = actual_command.find(from); at != std::string::npos; at = actual_command.find(from, at + to.size()))
      actual_command.replace(at, from.size(), to);
  };
  replace("build/gpuxray", gpuxray::testing::gpuxrayBinary());
  replace("out/demo", demo_dir);
  auto result = runCommand(actual_command);
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  std::vector<std::string> printed = linesOf(result.out);
  for (size_t i = 0; i < shown.size(); ++i) {
    INFO("line " << i + 1);
    REQUIRE(i < printed.size());
    // The file's path is printed as given; the README gives it relative to the checkout.
    std::string expected = shown[i];
    for (size_t at = expected.find("out/demo"); at != std::string::npos; at = expected.find("out/demo", at + demo_dir.size()))
      expected.replace(at, 8, demo_dir);
    CHECK(printed[i] == expected);
  }
}

}  // namespace

TEST_CASE("README: the demo's report and info blocks are what the commands print") {
  TempDir dir;
  std::string demo = dir / "demo";
  auto simulated = runCommand(gpuxray::testing::gpuxrayBinary() + " simulate --preset demo -o " + demo);
  INFO(simulated.err);
  REQUIRE(simulated.exit_code == 0);
  checkReadmeBlock("build/gpuxray analyze out/demo --perfetto out/demo/trace.pftrace", demo);
  checkReadmeBlock("build/gpuxray info out/demo/rank-00003.gpuxray", demo);
}
