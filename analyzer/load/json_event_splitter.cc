#include "analyzer/load/json_event_splitter.h"

#include <fmt/format.h>

#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace gpuxray::load {
namespace {

constexpr std::string_view kTraceEvents = "traceEvents";

bool isWhitespace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
bool isOpening(char c) { return (c | 0x20) == '{'; }  // '{' or '['

// The first '"', '{', '}', '[' or ']' in [p, end), or end.
const char* findStructural(const char* p, const char* end) {
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"'), open = _mm_set1_epi8('{'), close = _mm_set1_epi8('}');
  const __m128i lower = _mm_set1_epi8(0x20);
  for (; p + 16 <= end; p += 16) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    __m128i folded = _mm_or_si128(v, lower);  // '[' -> '{', ']' -> '}'
    __m128i hits = _mm_or_si128(_mm_cmpeq_epi8(v, quote),
                                _mm_or_si128(_mm_cmpeq_epi8(folded, open), _mm_cmpeq_epi8(folded, close)));
    if (int mask = _mm_movemask_epi8(hits)) return p + __builtin_ctz(static_cast<unsigned>(mask));
  }
#endif
  for (; p < end; ++p) {
    char c = *p;
    if (c == '"' || (c | 0x20) == '{' || (c | 0x20) == '}') return p;
  }
  return end;
}

// The first '"' or '\\' in [p, end), or end.
const char* findQuoteOrBackslash(const char* p, const char* end) {
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
  for (; p + 16 <= end; p += 16) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    __m128i hits = _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash));
    if (int mask = _mm_movemask_epi8(hits)) return p + __builtin_ctz(static_cast<unsigned>(mask));
  }
#endif
  for (; p < end; ++p) {
    if (*p == '"' || *p == '\\') return p;
  }
  return end;
}

// After the closing quote of a string whose contents start at p; nullptr when it runs past end.
const char* skipString(const char* p, const char* end) {
  for (;;) {
    p = findQuoteOrBackslash(p, end);
    if (p == end) return nullptr;
    if (*p == '"') return p + 1;
    p += 2;  // an escaped character
    if (p >= end) return nullptr;
  }
}

}  // namespace

JsonEventSplitter::JsonEventSplitter(ByteInput& input, size_t block_size)
    : input_(input), block_size_(block_size), buffer_(1 + block_size + kPadding + kSlack, ' ') {}

void JsonEventSplitter::fail(const std::string& what) {
  if (problem_.empty()) problem_ = what;
  state_ = State::kDone;
}

bool JsonEventSplitter::refill(size_t keep_from) {
  if (input_done_) return false;
  size_t kept = filled_ - keep_from;
  if (keep_from > 1) {
    std::memmove(buffer_.data() + 1, buffer_.data() + keep_from, kept);
    base_offset_ += keep_from - 1;
    pos_ -= keep_from - 1;
    filled_ = 1 + kept;
  }
  if (kept == block_size_) {  // one value fills the whole block: make room
    block_size_ *= 2;
    buffer_.resize(1 + block_size_ + kPadding + kSlack, ' ');
  }
  size_t n = input_.read(buffer_.data() + filled_, 1 + block_size_ - filled_);
  if (n == 0) {
    input_done_ = true;
    return false;
  }
  filled_ += n;
  std::memset(buffer_.data() + filled_, ' ', kPadding + kSlack);
  return true;
}

void JsonEventSplitter::skipWhitespace() {
  while (pos_ < filled_ && isWhitespace(buffer_[pos_])) ++pos_;
}

JsonEventSplitter::Scan JsonEventSplitter::scanString(size_t from, size_t* end) const {
  const char* base = buffer_.data();
  const char* after = skipString(base + from + 1, base + filled_);
  if (after == nullptr) return Scan::kNeedMore;
  *end = static_cast<size_t>(after - base);
  return Scan::kComplete;
}

JsonEventSplitter::Scan JsonEventSplitter::scanValue(size_t from, size_t* end) const {
  const char* base = buffer_.data();
  const char* limit = base + filled_;
  char c = base[from];
  if (c == '"') return scanString(from, end);
  if (isOpening(c)) {
    int64_t depth = 0;
    const char* p = base + from;
    for (;;) {
      p = findStructural(p, limit);
      if (p == limit) return Scan::kNeedMore;
      if (*p == '"') {
        p = skipString(p + 1, limit);
        if (p == nullptr) return Scan::kNeedMore;
        continue;
      }
      if (isOpening(*p)) {
        ++depth;
      } else if (--depth == 0) {
        *end = static_cast<size_t>(p + 1 - base);
        return Scan::kComplete;
      } else if (depth < 0) {
        return Scan::kInvalid;
      }
      ++p;
    }
  }
  // A number, true, false or null: up to the next delimiter.
  size_t i = from;
  while (i < filled_ && !isWhitespace(base[i]) && base[i] != ',' && base[i] != '}' && base[i] != ']') ++i;
  if (i == from) return Scan::kInvalid;
  if (i == filled_ && !input_done_) return Scan::kNeedMore;
  *end = i;
  return Scan::kComplete;
}

bool JsonEventSplitter::next(Piece& piece) {
  piece.events.clear();
  size_t run_start = 0, run_end = 0;
  auto emit_run = [&] {
    piece.kind = Piece::Kind::kEvents;
    piece.key.clear();
    piece.begin = buffer_.data() + run_start;
    piece.end = buffer_.data() + run_end;
    piece.offset = offsetOf(run_start);
    return true;
  };
  auto truncated = [&](const char* where) {
    fail(fmt::format("the JSON ends early, {} at byte {} (a truncated file?)", where, offsetOf(filled_)));
    return false;
  };

  for (;;) {
    switch (state_) {
      case State::kDone: return false;

      case State::kStart: {
        skipWhitespace();
        if (filled_ - pos_ < 3 && !input_done_) {
          if (!refill(pos_) && pos_ == filled_) {
            fail("the file is empty");
            return false;
          }
          continue;
        }
        if (pos_ == filled_) {
          fail("the file is empty");
          return false;
        }
        if (filled_ - pos_ >= 3 && std::memcmp(buffer_.data() + pos_, "\xEF\xBB\xBF", 3) == 0) {
          pos_ += 3;  // a UTF-8 byte order mark
          continue;
        }
        char c = buffer_[pos_];
        if (c == '{') {
          state_ = State::kMembers;
        } else if (c == '[') {
          state_ = State::kEvents;
          bare_array_ = saw_trace_events_ = true;
        } else {
          fail(fmt::format("not a JSON trace: it starts with '{}', not '{{' or '['", c));
          return false;
        }
        ++pos_;
        continue;
      }

      case State::kMembers: {
        skipWhitespace();
        if (pos_ == filled_) {
          if (!refill(pos_)) return truncated("inside the top-level object");
          continue;
        }
        char c = buffer_[pos_];
        if (c == ',') {
          ++pos_;
          continue;
        }
        if (c == '}') {
          ++pos_;
          state_ = State::kDone;
          continue;
        }
        if (c != '"') {
          fail(fmt::format("unexpected '{}' at byte {} where a member name should be", c, offsetOf(pos_)));
          return false;
        }
        // "key" : value, scanned as a whole (again from the key after a refill).
        size_t key_end = 0, i = 0, value_end = 0;
        Scan scan = scanString(pos_, &key_end);
        if (scan == Scan::kComplete) {
          i = key_end;
          while (i < filled_ && isWhitespace(buffer_[i])) ++i;
          if (i < filled_ && buffer_[i] != ':') {
            fail(fmt::format("expected ':' after a member name at byte {}", offsetOf(i)));
            return false;
          }
          if (i < filled_) ++i;
          while (i < filled_ && isWhitespace(buffer_[i])) ++i;
          if (i == filled_) scan = Scan::kNeedMore;
        }
        std::string_view key;
        if (scan == Scan::kComplete) {
          key = std::string_view(buffer_.data() + pos_ + 1, key_end - pos_ - 2);
          if (key == kTraceEvents && buffer_[i] == '[') {
            pos_ = i + 1;
            state_ = State::kEvents;
            saw_trace_events_ = true;
            continue;
          }
          scan = scanValue(i, &value_end);
        }
        if (scan == Scan::kNeedMore) {
          if (!refill(pos_)) return truncated("inside a top-level member");
          continue;
        }
        if (scan == Scan::kInvalid) {
          fail(fmt::format("malformed value of \"{}\" at byte {}", key, offsetOf(i)));
          return false;
        }
        piece.kind = Piece::Kind::kMember;
        piece.key = key;
        piece.begin = buffer_.data() + i;
        piece.end = buffer_.data() + value_end;
        piece.offset = offsetOf(i);
        pos_ = value_end;
        return true;
      }

      case State::kEvents: {
        while (pos_ < filled_ && (isWhitespace(buffer_[pos_]) || buffer_[pos_] == ',')) ++pos_;
        if (pos_ == filled_) {
          if (!piece.events.empty()) return emit_run();
          if (!refill(pos_)) return truncated("inside traceEvents");
          continue;
        }
        if (buffer_[pos_] == ']') {
          ++pos_;
          state_ = bare_array_ ? State::kDone : State::kMembers;
          if (!piece.events.empty()) return emit_run();
          continue;
        }
        size_t event_end = 0;
        Scan scan = scanValue(pos_, &event_end);
        if (scan == Scan::kNeedMore) {
          if (!piece.events.empty()) return emit_run();
          if (!refill(pos_)) return truncated("inside traceEvents");
          continue;
        }
        if (scan == Scan::kInvalid) {
          fail(fmt::format("unexpected '{}' at byte {} inside traceEvents", buffer_[pos_], offsetOf(pos_)));
          if (!piece.events.empty()) return emit_run();
          return false;
        }
        if (piece.events.empty()) run_start = pos_;
        piece.events.emplace_back(static_cast<uint32_t>(pos_ - run_start), static_cast<uint32_t>(event_end - run_start));
        run_end = event_end;
        pos_ = event_end;
        ++events_;
        if (run_end - run_start >= kEventRunBytes) return emit_run();
        continue;
      }
    }
  }
}

}  // namespace gpuxray::load
