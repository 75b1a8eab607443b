#pragma once

#include <string>

namespace gpuxray::testing {

// The gpuxray binary of this build. Its path is compiled into build_outputs.cc alone, not into each
// test file, so that a second build of the same tests (the analyzer-only one) reuses their objects.
const std::string& gpuxrayBinary();

}  // namespace gpuxray::testing
