#include "tests/support/build_outputs.h"

namespace gpuxray::testing {

const std::string& gpuxrayBinary() {
  static const std::string binary = GPUXRAY_BINARY;
  return binary;
}

}  // namespace gpuxray::testing
