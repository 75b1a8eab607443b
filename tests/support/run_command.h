// Runs a command line through the shell and captures what it printed and how it exited.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/support/temp_dir.h"

namespace gpuxray::testing {

struct CommandResult {
  // -1 when the command was killed by a signal.
  int exit_code = -1;
  // The signal that killed it, 0 when it exited. (Prefix the command with `exec` to see the
  // program's own death rather than that of the shell running it.)
  int term_signal = 0;
  std::string out;
  std::string err;
};

inline std::string readWholeFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// `command` is passed to /bin/sh; stderr goes to a temporary file so both streams are kept apart.
inline CommandResult runCommand(const std::string& command) {
  TempDir scratch;
  std::string err_path = scratch / "stderr";
  CommandResult result;
  FILE* pipe = popen((command + " 2>" + err_path).c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer{};
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.out.append(buffer.data(), n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.term_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  result.err = readWholeFile(err_path);
  return result;
}

}  // namespace gpuxray::testing
