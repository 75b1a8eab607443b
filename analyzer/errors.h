// The kinds of failure that end a gpuxray command; cli/ turns them into exit codes.
#pragma once

#include <new>
#include <stdexcept>
#include <string>
#include <utility>

namespace gpuxray {

// The command line asks for something impossible.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The input is unusable as a whole; the message names the file and the problem on one line.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The run needs more memory than the command may use (--max-memory), found out before it ran out: the
// message says how much, on one line. A bad_alloc, so that whatever stops work when memory runs out
// stops it for this too.
class MemoryBudgetError : public std::bad_alloc {
 public:
  explicit MemoryBudgetError(std::string message) : message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

}  // namespace gpuxray
