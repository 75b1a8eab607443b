// The two kinds of failure that end a gpuxray command; cli/ turns them into exit codes.
#pragma once

#include <stdexcept>

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

}  // namespace gpuxray
