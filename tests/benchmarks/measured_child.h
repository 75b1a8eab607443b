// Runs a program as the benchmarks time whole commands: its wall time, and its peak resident memory
// as wait4() reports it.
#pragma once

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <signal.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace gpuxray::benchmarks {

struct ChildRun {
  double seconds = 0;
  double cpu_seconds = 0;  // user + system
  uint64_t peak_bytes = 0;
  int exit_code = -1;    // -1 when it did not exit normally
  int term_signal = 0;   // the signal that ended it, 0 when it exited
  bool timed_out = false;  // killed by runMeasured after ChildLimits::timeout_s
};

// Bounds for a program that may misbehave (0: none): its address space, and its wall time, after
// which it is killed.
struct ChildLimits {
  uint64_t address_space_bytes = 0;
  double timeout_s = 0;
};

enum class ChildStderr { kKept, kDiscarded };

// `argv[0]` is the program's path; its standard output always goes to /dev/null.
inline ChildRun runMeasured(std::vector<std::string> argv, ChildStderr stderr_mode, ChildLimits limits = {}) {
  std::vector<char*> pointers;
  for (auto& arg : argv) pointers.push_back(arg.data());
  pointers.push_back(nullptr);
  auto started = std::chrono::steady_clock::now();
  pid_t child = fork();
  if (child == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, STDOUT_FILENO);
    if (stderr_mode == ChildStderr::kDiscarded) dup2(null, STDERR_FILENO);
    if (limits.address_space_bytes > 0) {
      rlimit bound{limits.address_space_bytes, limits.address_space_bytes};
      setrlimit(RLIMIT_AS, &bound);
    }
    execv(pointers[0], pointers.data());
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  ChildRun run;
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(); };
  if (limits.timeout_s <= 0) {
    wait4(child, &status, 0, &usage);
  } else {
    while (wait4(child, &status, WNOHANG, &usage) == 0) {
      if (elapsed() > limits.timeout_s) {
        kill(child, SIGKILL);
        wait4(child, &status, 0, &usage);
        run.timed_out = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  run.seconds = elapsed();
  run.peak_bytes = static_cast<uint64_t>(usage.ru_maxrss) * 1024;
  run.cpu_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                    static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.term_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return run;
}

}  // namespace gpuxray::benchmarks
