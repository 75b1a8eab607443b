#include "inject/nvtx_recorder.h"

#include <pthread.h>

#include <utility>

namespace gpuxray::inject {

struct NvtxRecorder::ThreadRanges {
  std::mutex mutex;
  std::vector<RecordedRange> open;      // the stack
  std::vector<RecordedRange> finished;  // since the last collect()
};

namespace {

std::atomic<NvtxRecorder*> g_recorder{nullptr};
std::atomic<uint64_t> g_generations{0};

// The calling thread's default-domain nesting (all its pushes, recorded or not) and its list in
// the recorder of `generation`, which owns the list. Trivially destructible, so that an NVTX call
// made while the thread or the process is ending finds it intact.
struct ThreadState {
  int depth = 0;
  uint64_t generation = 0;
  NvtxRecorder::ThreadRanges* ranges = nullptr;
};
thread_local ThreadState t_state;

std::string utf8Of(const wchar_t* text) {
  std::string out;
  if (text == nullptr) return out;
  for (; *text != L'\0'; ++text) {
    auto c = static_cast<uint32_t>(*text);
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | ((c >> 18) & 0x07));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

// A scalar payload as the format holds it; false for none or a kind that is not a scalar.
bool scalarPayload(const nvtxEventAttributes_t& a, format::PayloadField& field) {
  using Type = format::PayloadField::Type;
  switch (a.payloadType) {
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT64: field.type = Type::kUint, field.uint_value = a.payload.ullValue; return true;
    case NVTX_PAYLOAD_TYPE_INT64: field.type = Type::kInt, field.int_value = a.payload.llValue; return true;
    case NVTX_PAYLOAD_TYPE_DOUBLE: field.type = Type::kDouble, field.double_value = a.payload.dValue; return true;
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT32: field.type = Type::kUint, field.uint_value = a.payload.uiValue; return true;
    case NVTX_PAYLOAD_TYPE_INT32: field.type = Type::kInt, field.int_value = a.payload.iValue; return true;
    case NVTX_PAYLOAD_TYPE_FLOAT: field.type = Type::kDouble, field.double_value = a.payload.fValue; return true;
    default: return false;
  }
}

}  // namespace

NvtxRecorder::NvtxRecorder(NvtxRecorderHooks hooks) : hooks_(std::move(hooks)), generation_(++g_generations) {}

NvtxRecorder::~NvtxRecorder() {
  deactivate();
}

void NvtxRecorder::activate() {
  g_recorder.store(this, std::memory_order_release);
}

void NvtxRecorder::deactivate() {
  NvtxRecorder* self = this;
  g_recorder.compare_exchange_strong(self, nullptr, std::memory_order_acq_rel);
}

NvtxRecorder::ThreadRanges& NvtxRecorder::threadRanges() {
  if (t_state.generation != generation_ || t_state.ranges == nullptr) {
    auto ranges = std::make_unique<ThreadRanges>();
    t_state.ranges = ranges.get();
    t_state.generation = generation_;
    std::lock_guard<std::mutex> lock(threads_mutex_);
    threads_.push_back(std::move(ranges));
  }
  return *t_state.ranges;
}

int NvtxRecorder::push(RecordedRange range, const char* name_for_windows) {
  const int level = t_state.depth++;
  try {
    const uint64_t now = hooks_.clock();
    range.start_ns = now;
    if (hooks_.record) {
      range.thread_id = static_cast<uint32_t>(pthread_self());
      range.depth = static_cast<uint32_t>(level);
      ThreadRanges& ranges = threadRanges();
      std::lock_guard<std::mutex> lock(ranges.mutex);
      ranges.open.push_back(std::move(range));
    }
    if (hooks_.on_push) hooks_.on_push(name_for_windows, now);
  } catch (...) {
    dropped_.fetch_add(1, std::memory_order_relaxed);  // out of memory: the job goes on
  }
  return level;
}

int NvtxRecorder::pop() {
  if (t_state.depth == 0) {
    unmatched_pops_.fetch_add(1, std::memory_order_relaxed);
    return -1;
  }
  const int level = --t_state.depth;
  try {
    const uint64_t now = hooks_.clock();
    if (hooks_.record) {
      ThreadRanges& ranges = threadRanges();
      std::lock_guard<std::mutex> lock(ranges.mutex);
      // Empty when the range was pushed before this recorder was active: nothing to end.
      if (!ranges.open.empty() && ranges.open.back().depth == static_cast<uint32_t>(level)) {
        if (ranges.finished.size() < kMaxPendingPerThread) {
          ranges.finished.push_back(std::move(ranges.open.back()));
          ranges.finished.back().end_ns = now;
        } else {
          dropped_.fetch_add(1, std::memory_order_relaxed);
        }
        ranges.open.pop_back();
      }
    }
    if (hooks_.on_pop) hooks_.on_pop(now);
  } catch (...) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
  }
  return level;
}

std::vector<RecordedRange> NvtxRecorder::collect(bool final) {
  std::vector<ThreadRanges*> threads;
  {
    std::lock_guard<std::mutex> lock(threads_mutex_);
    for (const auto& thread : threads_) threads.push_back(thread.get());
  }
  std::vector<RecordedRange> collected;
  for (ThreadRanges* thread : threads) {
    std::lock_guard<std::mutex> lock(thread->mutex);
    if (thread->finished.empty()) {
      // An idle thread, or one that ended: its list gives its memory back.
      thread->finished.shrink_to_fit();
    } else {
      std::move(thread->finished.begin(), thread->finished.end(), std::back_inserter(collected));
      thread->finished.clear();
    }
    if (final) {
      std::move(thread->open.begin(), thread->open.end(), std::back_inserter(collected));
      thread->open.clear();
    }
  }
  return collected;
}

uint64_t NvtxRecorder::dropped() const {
  return dropped_.load(std::memory_order_relaxed);
}

uint64_t NvtxRecorder::unmatchedPops() const {
  return unmatched_pops_.load(std::memory_order_relaxed);
}

int NvtxRecorder::rangePushA(const char* message) {
  NvtxRecorder* recorder = g_recorder.load(std::memory_order_acquire);
  if (recorder == nullptr) return t_state.depth++;
  RecordedRange range;
  if (recorder->hooks_.record && message != nullptr) range.name = message;
  return recorder->push(std::move(range), message);
}

int NvtxRecorder::rangePushW(const wchar_t* message) {
  NvtxRecorder* recorder = g_recorder.load(std::memory_order_acquire);
  if (recorder == nullptr) return t_state.depth++;
  RecordedRange range;
  range.name = utf8Of(message);
  std::string name = range.name;
  return recorder->push(std::move(range), name.c_str());
}

int NvtxRecorder::rangePushEx(const nvtxEventAttributes_t* attributes) {
  NvtxRecorder* recorder = g_recorder.load(std::memory_order_acquire);
  if (recorder == nullptr) return t_state.depth++;
  RecordedRange range;
  const char* name = nullptr;
  if (attributes != nullptr) {
    switch (attributes->messageType) {
      case NVTX_MESSAGE_TYPE_ASCII:
        name = attributes->message.ascii;
        if (name != nullptr) range.name = name;
        break;
      case NVTX_MESSAGE_TYPE_UNICODE: range.name = utf8Of(attributes->message.unicode); break;
      default: break;  // a registered string: its text stays with the NVTX client's registry
    }
    range.category = attributes->category;
    if (attributes->colorType == NVTX_COLOR_ARGB) range.color = attributes->color;
    range.has_payload = scalarPayload(*attributes, range.payload);
  }
  std::string windows_name = name == nullptr ? range.name : std::string();
  return recorder->push(std::move(range), name != nullptr ? name : windows_name.c_str());
}

int NvtxRecorder::rangePop() {
  NvtxRecorder* recorder = g_recorder.load(std::memory_order_acquire);
  if (recorder == nullptr) {
    if (t_state.depth == 0) return -1;
    return --t_state.depth;
  }
  return recorder->pop();
}

bool NvtxRecorder::install(const void* get_export_table) {
  if (get_export_table == nullptr) return false;
  auto get = reinterpret_cast<NvtxGetExportTableFunc_t>(const_cast<void*>(get_export_table));
  const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr || callbacks->struct_size < sizeof(NvtxExportTableCallbacks) ||
      callbacks->GetModuleFunctionTable == nullptr)
    return false;
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) == 0 || table == nullptr ||
      size < NVTX_CBID_CORE_RangePop)
    return false;
  const std::pair<NvtxCallbackIdCore, NvtxFunctionPointer> handlers[] = {
      {NVTX_CBID_CORE_RangePushA, reinterpret_cast<NvtxFunctionPointer>(&rangePushA)},
      {NVTX_CBID_CORE_RangePushW, reinterpret_cast<NvtxFunctionPointer>(&rangePushW)},
      {NVTX_CBID_CORE_RangePushEx, reinterpret_cast<NvtxFunctionPointer>(&rangePushEx)},
      {NVTX_CBID_CORE_RangePop, reinterpret_cast<NvtxFunctionPointer>(&rangePop)},
  };
  for (const auto& [id, handler] : handlers) {
    if (table[id] == nullptr) return false;
  }
  for (const auto& [id, handler] : handlers) *table[id] = handler;
  return true;
}

}  // namespace gpuxray::inject
