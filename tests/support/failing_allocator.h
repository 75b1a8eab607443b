// An allocator that fails on demand, for tests that nothing throws out of a C entry point: linked
// into a test program of its own, it replaces the global operator new.
#pragma once

#include <cstdint>

namespace gpuxray::testing {

// The allocation after `allocations` more succeed throws std::bad_alloc; -1 never.
void failAllocationAfter(int64_t allocations);
// Whether an allocation failed since the last failAllocationAfter.
bool allocationFailed();

}  // namespace gpuxray::testing
