// The HTML report's script, bundled from web/ by esbuild at build time and embedded by a generated
// source (analyzer/CMakeLists.txt); empty when the build had no Node.js or web/node_modules.
#pragma once

#include <string_view>

namespace gpuxray::report {

std::string_view reportBundleScript();

}  // namespace gpuxray::report
