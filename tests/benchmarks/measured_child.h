// Runs a program as the benchmarks time whole commands: its wall time, and its peak resident memory
// as wait4() reports it.
#pragma once

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace gpuxray::benchmarks {

struct ChildRun {
  double seconds = 0;
  uint64_t peak_bytes = 0;
  int exit_code = -1;  // -1 when it did not exit normally
};

enum class ChildStderr { kKept, kDiscarded };

// `argv[0]` is the program's path; its standard output always goes to /dev/null.
inline ChildRun runMeasured(std::vector<std::string> argv, ChildStderr stderr_mode) {
  std::vector<char*> pointers;
  for (auto& arg : argv) pointers.push_back(arg.data());
  pointers.push_back(nullptr);
  auto started = std::chrono::steady_clock::now();
  pid_t child = fork();
  if (child == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, STDOUT_FILENO);
    if (stderr_mode == ChildStderr::kDiscarded) dup2(null, STDERR_FILENO);
    execv(pointers[0], pointers.data());
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  wait4(child, &status, 0, &usage);
  ChildRun run;
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  run.peak_bytes = static_cast<uint64_t>(usage.ru_maxrss) * 1024;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

}  // namespace gpuxray::benchmarks
