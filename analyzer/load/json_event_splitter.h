// Cuts a Chrome/PyTorch-profiler trace (`{"traceEvents": [...], "distributedInfo": {...}, ...}`, or
// a bare array of events) into pieces small enough to parse one at a time, reading it in blocks:
// each top-level member but traceEvents whole, and traceEvents as runs of consecutive events. Only
// the block being cut is held, never the whole text.
//
// Cutting needs only strings, escapes and bracket depth; whether each piece is valid JSON is left to
// the parser. A piece stays valid (and writable) until the next call to next().
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "analyzer/load/byte_input.h"

namespace gpuxray::load {

class JsonEventSplitter {
 public:
  // Bytes the parser may read past the end of a piece (simdjson's padding), with a few to spare for
  // a closing bracket put after it.
  static constexpr size_t kPadding = 64;
  static constexpr size_t kSlack = 8;
  // A run of events is handed over when it reaches this size (or the block ends).
  static constexpr size_t kEventRunBytes = 256u << 10;

  struct Piece {
    enum class Kind { kMember, kEvents };
    Kind kind = Kind::kMember;
    std::string key;  // kMember: the member's name
    // kMember: the value's text. kEvents: from the first event's first byte to the last event's last
    // byte (separators included). One byte before `begin` and kPadding bytes after `end` may be
    // read and temporarily overwritten.
    char* begin = nullptr;
    char* end = nullptr;
    // kEvents: each event's [begin, end) as offsets from `begin`.
    std::vector<std::pair<uint32_t, uint32_t>> events;
    // Offset of `begin` in the whole (uncompressed) text.
    uint64_t offset = 0;
  };

  explicit JsonEventSplitter(ByteInput& input, size_t block_size = 1u << 20);

  // The next piece; false at the end of the text, or where it cannot be cut further (problem()).
  bool next(Piece& piece);
  // Why cutting stopped early: "" when the text was complete.
  const std::string& problem() const { return problem_; }
  // Events seen in traceEvents so far.
  uint64_t events() const { return events_; }
  bool sawTraceEvents() const { return saw_trace_events_; }

 private:
  enum class State { kStart, kMembers, kEvents, kDone };
  enum class Scan { kComplete, kNeedMore, kInvalid };

  // Makes more bytes available after pos_, keeping [keep_from, filled_). False at the end of input.
  bool refill(size_t keep_from);
  void skipWhitespace();
  Scan scanValue(size_t from, size_t* end) const;
  Scan scanString(size_t from, size_t* end) const;
  void fail(const std::string& what);
  uint64_t offsetOf(size_t index) const { return base_offset_ + (index - 1); }

  ByteInput& input_;
  size_t block_size_;
  std::vector<char> buffer_;  // [0] is reserved (see Piece), data from 1 to filled_
  size_t pos_ = 1;
  size_t filled_ = 1;
  bool input_done_ = false;
  uint64_t base_offset_ = 0;  // offset in the text of buffer_[1]
  State state_ = State::kStart;
  bool bare_array_ = false;
  bool saw_trace_events_ = false;
  uint64_t events_ = 0;
  std::string problem_;
};

}  // namespace gpuxray::load
