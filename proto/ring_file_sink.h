// A trace file of bounded size that keeps the most recent chunks: a flight recorder. After the
// preamble and the header chunk the file is a ring of equal slots, one chunk each; when every slot
// holds one, the next chunk replaces the oldest. The rest of a slot is a filler chunk (a valid
// chunk holding an empty batch: an unknown field of zeros, which readers skip), so the file is
// always a plain sequence of chunks that any reader reads without knowing about the ring: each
// chunk defines what its records use, and the loader orders records by time. The trailer goes in
// one more slot after the ring, so it is read last.
//
// Each slot is written with one pwritev: a process killed during a rotation leaves at most that
// slot torn, which a reader skips by its checksum and resynchronizes past.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "proto/trace_writer.h"

namespace gpuxray::format {

class RingFileSink final : public ByteSink {
 public:
  // `capacity_bytes`: the most the file holds. `slot_bytes`: one slot; chunks must leave room for
  // a filler (kMinFillerBytes) in it. At least two slots fit, or ok() is false.
  RingFileSink(const std::string& path, uint64_t capacity_bytes, uint32_t slot_bytes);
  ~RingFileSink() override;
  bool ok() const { return fd_ >= 0 && error_.empty(); }
  int openErrno() const { return open_errno_; }
  bool append(std::span<const uint8_t> first, std::span<const uint8_t> second) override;
  void beforeTrailer() override { trailer_next_ = true; }
  std::string error() const override { return error_; }

  // Chunks written over (the records they held are gone), and their bytes.
  uint64_t overwrittenChunks() const { return overwritten_chunks_; }
  uint64_t overwrittenBytes() const { return overwritten_bytes_; }

  // The biggest chunk a slot of `slot_bytes` takes.
  static uint32_t largestChunk(uint32_t slot_bytes) { return slot_bytes - kMinFillerBytes; }
  static constexpr uint32_t kMinFillerBytes = 64;

 private:
  bool writeAt(uint64_t offset, std::span<const uint8_t> first, std::span<const uint8_t> second,
               std::span<const uint8_t> third);

  std::string path_;
  int fd_ = -1;
  int open_errno_ = 0;
  std::string error_;
  uint64_t capacity_;
  uint32_t slot_bytes_;
  // Where the ring starts (after the preamble and the header chunk) and how many slots it has.
  uint64_t ring_start_ = 0;
  uint64_t slots_ = 0;
  uint64_t appends_ = 0;
  uint64_t chunks_in_ring_ = 0;
  std::vector<uint64_t> slot_chunk_bytes_;
  uint64_t overwritten_chunks_ = 0;
  uint64_t overwritten_bytes_ = 0;
  bool trailer_next_ = false;
  std::vector<uint8_t> filler_;
};

// The filler chunk that makes `bytes` bytes (>= RingFileSink::kMinFillerBytes) of a slot readable.
std::vector<uint8_t> fillerChunk(uint32_t bytes);

}  // namespace gpuxray::format
