// A stand-in libcupti.so.13 or .so.12 for `gpuxray doctor`'s CUPTI check: it exports every function the
// capture binds (cupti_api.cc) and reports FAKE_CUPTI_API_VERSION from cuptiGetVersion; the rest
// answer CUPTI_ERROR_NOT_INITIALIZED, as nothing else is called by the check.

#include <cstdint>

namespace {
constexpr int kSuccess = 0;
constexpr int kNotInitialized = 15;
}  // namespace

#define FAKE_CUPTI_EXPORT extern "C" __attribute__((visibility("default")))
#define FAKE_CUPTI_UNUSED(name)  \
  FAKE_CUPTI_EXPORT int name() { \
    return kNotInitialized;      \
  }

FAKE_CUPTI_EXPORT int cuptiGetVersion(uint32_t* version) {
  *version = FAKE_CUPTI_API_VERSION;
  return kSuccess;
}
FAKE_CUPTI_UNUSED(cuptiGetTimestamp)
FAKE_CUPTI_UNUSED(cuptiGetResultString)
FAKE_CUPTI_UNUSED(cuptiGetCallbackName)
FAKE_CUPTI_UNUSED(cuptiSubscribe)
FAKE_CUPTI_UNUSED(cuptiUnsubscribe)
FAKE_CUPTI_UNUSED(cuptiEnableCallback)
FAKE_CUPTI_UNUSED(cuptiActivityEnable)
FAKE_CUPTI_UNUSED(cuptiActivityEnableAndDump)
FAKE_CUPTI_UNUSED(cuptiActivityDisable)
FAKE_CUPTI_UNUSED(cuptiActivityEnableRuntimeApi)
FAKE_CUPTI_UNUSED(cuptiActivityEnableDriverApi)
FAKE_CUPTI_UNUSED(cuptiActivityRegisterCallbacks)
FAKE_CUPTI_UNUSED(cuptiActivityGetNextRecord)
FAKE_CUPTI_UNUSED(cuptiActivityGetNumDroppedRecords)
FAKE_CUPTI_UNUSED(cuptiActivityFlushAll)
FAKE_CUPTI_UNUSED(cuptiActivitySetAttribute)
FAKE_CUPTI_UNUSED(cuptiFinalize)
FAKE_CUPTI_UNUSED(InitializeInjectionNvtx2)
FAKE_CUPTI_UNUSED(InitializeInjectionNvtxExtension)
