#include "proto/ring_file_sink.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "proto/file_layout.h"

namespace gpuxray::format {
namespace {

// A length as a 5-byte varint (non-minimal encodings are valid protobuf), so the filler's size is
// exact whatever its length.
void putFixedVarint(std::vector<uint8_t>& out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>((value >> (7 * i)) & 0x7f) | 0x80);
  out.push_back(static_cast<uint8_t>(value >> 28));
}

// EventBatch field 1000 is unknown to every reader and holds nothing.
constexpr uint32_t kFillerField = 1000;

}  // namespace

std::vector<uint8_t> fillerChunk(uint32_t bytes) {
  // Chunk { batch (2) = EventBatch { field 1000 = zeros } }: 1 + 5 + [2 + 5 + zeros].
  uint32_t payload = bytes - static_cast<uint32_t>(kChunkHeaderSize);
  uint32_t zeros = payload - 13;
  std::vector<uint8_t> body;
  body.reserve(payload);
  body.push_back(0x12);  // field 2, length-delimited
  putFixedVarint(body, 2 + 5 + zeros);
  uint32_t tag = kFillerField << 3 | 2;
  body.push_back(static_cast<uint8_t>(tag & 0x7f) | 0x80);
  body.push_back(static_cast<uint8_t>(tag >> 7));
  putFixedVarint(body, zeros);
  body.resize(payload, 0);
  auto header = encodeChunkHeader(Codec::kNone, payload, body);
  std::vector<uint8_t> chunk(bytes);
  std::memcpy(chunk.data(), header.data(), header.size());
  std::memcpy(chunk.data() + header.size(), body.data(), body.size());
  return chunk;
}

RingFileSink::RingFileSink(const std::string& path, uint64_t capacity_bytes, uint32_t slot_bytes)
    : path_(path), capacity_(capacity_bytes), slot_bytes_(slot_bytes) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    open_errno_ = errno;
    error_ = path + ": cannot create: " + std::strerror(errno);
  }
}

RingFileSink::~RingFileSink() {
  if (fd_ >= 0) ::close(fd_);
}

bool RingFileSink::writeAt(uint64_t offset, std::span<const uint8_t> first, std::span<const uint8_t> second,
                           std::span<const uint8_t> third) {
  iovec parts[3] = {{const_cast<uint8_t*>(first.data()), first.size()},
                    {const_cast<uint8_t*>(second.data()), second.size()},
                    {const_cast<uint8_t*>(third.data()), third.size()}};
  int index = 0;
  while (index < 3) {
    ssize_t n = ::pwritev(fd_, parts + index, 3 - index, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      error_ = path_ + ": write failed: " + std::strerror(errno);
      return false;
    }
    offset += static_cast<uint64_t>(n);
    size_t left = static_cast<size_t>(n);
    while (index < 3 && left >= parts[index].iov_len) left -= parts[index++].iov_len;
    if (index < 3) {
      parts[index].iov_base = static_cast<uint8_t*>(parts[index].iov_base) + left;
      parts[index].iov_len -= left;
    }
  }
  return true;
}

bool RingFileSink::append(std::span<const uint8_t> first, std::span<const uint8_t> second) {
  if (!ok()) return false;
  uint64_t size = first.size() + second.size();
  // The preamble and the header chunk, once, at the start.
  if (appends_ < 2) {
    if (!writeAt(ring_start_, first, second, {})) return false;
    ring_start_ += size;
    if (++appends_ == 2) {
      slots_ = capacity_ > ring_start_ + slot_bytes_ ? (capacity_ - ring_start_ - slot_bytes_) / slot_bytes_ : 0;
      if (slots_ < 2) {
        error_ = path_ + ": a ring of " + std::to_string(capacity_ >> 20) + " MiB holds fewer than two " +
                 std::to_string(slot_bytes_ >> 10) + " KiB chunks";
        return false;
      }
      slot_chunk_bytes_.assign(slots_, 0);
    }
    return true;
  }
  ++appends_;
  if (size > largestChunk(slot_bytes_)) {
    error_ = path_ + ": a " + std::to_string(size) + "-byte chunk does not fit a ring slot";
    return false;
  }
  uint64_t slot = trailer_next_ ? slots_ : chunks_in_ring_ % slots_;
  if (!trailer_next_) {
    if (slot_chunk_bytes_[slot] != 0) {
      ++overwritten_chunks_;
      overwritten_bytes_ += slot_chunk_bytes_[slot];
    }
    slot_chunk_bytes_[slot] = size;
    ++chunks_in_ring_;
  }
  uint64_t offset = ring_start_ + slot * slot_bytes_;
  if (trailer_next_) return writeAt(offset, first, second, {});
  filler_ = fillerChunk(static_cast<uint32_t>(slot_bytes_ - size));
  return writeAt(offset, first, second, filler_);
}

}  // namespace gpuxray::format
