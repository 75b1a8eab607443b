// Kernel names as people read them. CUPTI names a kernel by its symbol
// (_ZN2at6native29vectorized_elementwise_kernel...), the PyTorch profiler by its demangled name
// (void at::native::vectorized_elementwise_kernel<...>(...)); the model holds the readable form for
// both, so reports, pattern matches and run comparisons see one name whichever way it came.
#pragma once

#include <string>
#include <string_view>

namespace gpuxray::model {

// The demangled form of an Itanium C++ symbol; "" when `name` is no such symbol (a C kernel, an
// already readable name).
std::string demangledKernelName(std::string_view name);

}  // namespace gpuxray::model
