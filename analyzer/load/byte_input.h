// Reads a file's bytes front to back in blocks: plain, or gzip (one or more members) inflated with
// zlib. Gzip input is inflated on a thread of its own, a few blocks ahead of the reader, so that
// decompression and parsing overlap; at most kQueuedBlocks blocks are held at once.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gpuxray::load {

class ByteInput {
 public:
  static constexpr size_t kBlockSize = 1u << 20;
  static constexpr size_t kQueuedBlocks = 4;

  // Throws InputError when the file cannot be opened.
  explicit ByteInput(const std::string& path);
  ~ByteInput();
  ByteInput(const ByteInput&) = delete;
  ByteInput& operator=(const ByteInput&) = delete;

  // Copies up to `capacity` bytes into `out`; 0 only at the end of the input (clean or not).
  size_t read(char* out, size_t capacity);

  bool compressed() const { return compressed_; }
  uint64_t fileBytes() const { return file_bytes_; }
  // Bytes handed out so far (after inflating).
  uint64_t bytesRead() const { return bytes_read_; }
  // Why the input ended early ("" when it ended cleanly): a truncated or corrupt gzip stream, a
  // read error. Valid once read() returned 0.
  std::string problem() const;

  // Whether the file starts like gzip data.
  static bool isGzipFile(const std::string& path);

 private:
  size_t readPlain(char* out, size_t capacity);
  void inflateAll();  // the inflating thread
  void finishInflating(std::string problem);

  int fd_ = -1;
  std::string path_;
  bool compressed_ = false;
  uint64_t file_bytes_ = 0;
  uint64_t bytes_read_ = 0;
  std::string problem_;

  // Gzip: blocks inflated ahead, handed over under the mutex.
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::vector<char>> ready_;
  std::vector<std::vector<char>> spare_;  // blocks read out, for the inflater to fill again
  std::vector<char> current_;
  size_t current_pos_ = 0;
  bool inflate_done_ = false;
  bool stopping_ = false;
  std::thread inflater_;
};

}  // namespace gpuxray::load
