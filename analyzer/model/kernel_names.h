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

// A kernel's name on one line of a report: a C++ signature without its parameter list ("void
// sgemm_largek_lds64<true, 5>(float*, int const*)" -> "void sgemm_largek_lds64<true, 5>"; the
// parameters repeat what the template says, and took a 90-character cut's room), then at most `most`
// characters, the cut marked "...". Other names (nvjet_..., "Memcpy HtoD (Pageable -> Device)")
// are only cut.
std::string reportedKernelName(std::string_view name, size_t most = 90);

}  // namespace gpuxray::model
