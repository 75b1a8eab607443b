// `gpuxray trigger TARGET --duration 10s`: opens a capture window now, for that long, in processes
// that `gpuxray run` is capturing. TARGET is their output directory (every process capturing
// there) or one process id. They talk through files in the output directory (the protocol is
// proto/capture_windows.h's): each capturing process keeps a live marker, takes a request within
// about 50 ms and answers with one line, which is printed here.

#include <fmt/core.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "analyzer/cli/commands.h"
#include "analyzer/errors.h"
#include "proto/capture_windows.h"

namespace gpuxray::cli {
namespace {

namespace fs = std::filesystem;

struct TriggerOptions {
  std::string target;
  std::string duration;
  std::string wait = "5s";
};

struct CapturingProcess {
  uint32_t pid = 0;
  std::string host;
};

std::string readText(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// "name=value" lines of a live marker.
std::string markerValue(const std::string& text, const std::string& name) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name + "=", 0) == 0) return line.substr(name.size() + 1);
  }
  return {};
}

std::string thisHost() {
  char host[256] = {};
  return gethostname(host, sizeof host - 1) == 0 ? std::string(host) : std::string();
}

std::vector<CapturingProcess> capturingIn(const fs::path& dir) {
  std::vector<CapturingProcess> found;
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    uint32_t pid = format::pidOfLiveMarker(it->path().filename().string());
    if (pid != 0) found.push_back({pid, markerValue(readText(it->path()), "host")});
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.pid < b.pid; });
  return found;
}

// The output directory of a process started under `gpuxray run`, from its environment.
std::optional<std::string> outputDirOf(uint32_t pid) {
  std::ifstream environ_file(fmt::format("/proc/{}/environ", pid), std::ios::binary);
  if (!environ_file) throw InputError(fmt::format("pid {}: no such process (or not one of yours)", pid));
  for (std::string entry; std::getline(environ_file, entry, '\0');) {
    if (entry.rfind("GPUXRAY_OUTPUT_DIR=", 0) == 0) return entry.substr(19);
  }
  return std::nullopt;
}

bool allDigits(const std::string& text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

ExitCode runTrigger(const TriggerOptions& options) {
  auto duration = format::parseDurationNs(options.duration);
  if (!duration || *duration == 0)
    throw UsageError(fmt::format("--duration '{}': expected a duration such as 10s, 500ms or 2m", options.duration));
  auto wait = format::parseDurationNs(options.wait);
  if (!wait) throw UsageError(fmt::format("--wait '{}': expected a duration such as 5s", options.wait));

  fs::path dir;
  std::vector<CapturingProcess> processes;
  if (allDigits(options.target)) {
    auto pid = static_cast<uint32_t>(std::stoul(options.target));
    auto output = outputDirOf(pid);
    if (!output) {
      throw InputError(
          fmt::format("pid {}: not started under gpuxray run (no GPUXRAY_OUTPUT_DIR in its environment)", pid));
    }
    dir = *output;
    for (const auto& process : capturingIn(dir)) {
      if (process.pid == pid) processes.push_back(process);
    }
    if (processes.empty()) {
      throw InputError(
          fmt::format("pid {}: runs under gpuxray run but is not capturing (it has not initialized CUDA, "
                      "or its capture could not start or has ended)",
                      pid));
    }
  } else {
    dir = options.target;
    std::error_code error;
    if (!fs::is_directory(dir, error))
      throw InputError(fmt::format("{}: not a directory or a process id", dir.string()));
    processes = capturingIn(dir);
    if (processes.empty())
      throw InputError(fmt::format("{}: no process is capturing there (no live capture markers)", dir.string()));
  }

  std::string host = thisHost();
  std::vector<CapturingProcess> asked;
  bool all_answered = true;
  for (const auto& process : processes) {
    // On a shared directory another host's processes read their requests there too.
    if (process.host == host && kill(static_cast<pid_t>(process.pid), 0) != 0 && errno == ESRCH) {
      fmt::print("pid {}: not running (its capture ended without removing {})\n", process.pid,
                 format::liveMarkerName(process.pid));
      all_answered = false;
      continue;
    }
    fs::path ack = dir / format::triggerAckName(process.pid);
    std::error_code ignored;
    fs::remove(ack, ignored);
    fs::path request = dir / format::triggerRequestName(process.pid);
    fs::path temporary = request;
    temporary += ".tmp";
    {
      std::ofstream out(temporary);
      out << *duration << "\n";
      if (!out) throw InputError(fmt::format("{}: cannot write the trigger request", temporary.string()));
    }
    fs::rename(temporary, request);
    asked.push_back(process);
  }

  auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(*wait);
  std::map<uint32_t, std::string> answers;
  while (answers.size() < asked.size() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (const auto& process : asked) {
      if (answers.contains(process.pid)) continue;
      fs::path ack = dir / format::triggerAckName(process.pid);
      std::error_code error;
      if (!fs::exists(ack, error)) continue;
      std::string line = readText(ack);
      while (!line.empty() && line.back() == '\n') line.pop_back();
      answers[process.pid] = line;
      fs::remove(ack, error);
    }
  }
  for (const auto& process : asked) {
    if (auto it = answers.find(process.pid); it != answers.end()) {
      fmt::print("{}\n", it->second);
    } else {
      std::error_code ignored;
      fs::remove(dir / format::triggerRequestName(process.pid), ignored);
      fmt::print("pid {}{}: no answer within {} (stopped, stuck, or its capture thread has ended)\n", process.pid,
                 process.host == host ? "" : " on " + process.host, options.wait);
      all_answered = false;
    }
  }
  return all_answered ? ExitCode::kOk : ExitCode::kBadInput;
}

}  // namespace

CommandAction addTriggerCommand(CLI::App& app) {
  auto options = std::make_shared<TriggerOptions>();
  CLI::App* command =
      app.add_subcommand("trigger", "Open a capture window now in processes that gpuxray run is capturing");
  command
      ->add_option("target", options->target,
                   "Their output directory (every process capturing there), or one process id")
      ->required()
      ->type_name("DIR|PID");
  command->add_option("--duration", options->duration, "How long the window stays open (10s, 500ms, 2m)")
      ->required()
      ->type_name("DURATION");
  command->add_option("--wait", options->wait, "How long to wait for each process's answer (default: 5s)")
      ->type_name("DURATION");
  command->footer(
      "The processes must capture with a window plan (--capture-range trigger records nothing until\n"
      "triggered); each answers with one line. Exit status 0 when every process answered.");
  return [options] { return runTrigger(*options); };
}

}  // namespace gpuxray::cli
