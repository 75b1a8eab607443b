#include "analyzer/load/byte_input.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "analyzer/errors.h"

namespace gpuxray::load {

bool ByteInput::isGzipFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  unsigned char magic[2] = {0, 0};
  ssize_t n = ::read(fd, magic, 2);
  ::close(fd);
  return n == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

ByteInput::ByteInput(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw InputError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd_, &st) == 0) file_bytes_ = static_cast<uint64_t>(st.st_size);
  unsigned char magic[2] = {0, 0};
  compressed_ = ::pread(fd_, magic, 2, 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  if (compressed_) inflater_ = std::thread([this] { inflateAll(); });
}

ByteInput::~ByteInput() {
  if (inflater_.joinable()) {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    inflater_.join();
  }
  if (fd_ >= 0) ::close(fd_);
}

std::string ByteInput::problem() const {
  std::lock_guard lock(mutex_);
  return problem_;
}

size_t ByteInput::readPlain(char* out, size_t capacity) {
  size_t done = 0;
  while (done < capacity) {
    ssize_t n = ::read(fd_, out + done, capacity - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      std::lock_guard lock(mutex_);
      problem_ = fmt::format("read error after {} bytes: {}", bytes_read_ + done, std::strerror(errno));
      break;
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

size_t ByteInput::read(char* out, size_t capacity) {
  if (!compressed_) {
    size_t n = readPlain(out, capacity);
    bytes_read_ += n;
    return n;
  }
  size_t done = 0;
  while (done < capacity) {
    if (current_pos_ == current_.size()) {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [this] { return !ready_.empty() || inflate_done_; });
      if (ready_.empty()) break;
      if (current_.capacity() > 0) spare_.push_back(std::move(current_));
      current_ = std::move(ready_.front());
      ready_.pop_front();
      current_pos_ = 0;
      lock.unlock();
      changed_.notify_all();
    }
    size_t n = std::min(capacity - done, current_.size() - current_pos_);
    std::memcpy(out + done, current_.data() + current_pos_, n);
    current_pos_ += n;
    done += n;
  }
  bytes_read_ += done;
  return done;
}

void ByteInput::finishInflating(std::string problem) {
  {
    std::lock_guard lock(mutex_);
    problem_ = std::move(problem);
    inflate_done_ = true;
  }
  changed_.notify_all();
}

void ByteInput::inflateAll() {
  z_stream z{};
  // 15 + 32: a zlib or gzip header, detected.
  if (inflateInit2(&z, 15 + 32) != Z_OK) return finishInflating("zlib could not be initialised");
  std::vector<unsigned char> in(256u << 10);
  uint64_t compressed_read = 0;
  bool in_member = false;  // inside a gzip member that has not ended yet
  std::string problem;
  std::vector<char> block(kBlockSize);
  size_t filled = 0;
  auto hand_over = [&](bool last) {
    if (filled == 0 && !last) return true;
    block.resize(filled);
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return ready_.size() < kQueuedBlocks || stopping_; });
    if (stopping_) return false;
    if (filled > 0) ready_.push_back(std::move(block));
    // Blocks are reused: fresh ones would cost page faults, as large allocations go back to the
    // system when freed.
    if (!spare_.empty()) {
      block = std::move(spare_.back());
      spare_.pop_back();
    } else {
      block = std::vector<char>();
    }
    lock.unlock();
    changed_.notify_all();
    block.resize(kBlockSize);
    filled = 0;
    return true;
  };
  bool stopped = false;
  for (;;) {
    if (z.avail_in == 0) {
      ssize_t n = ::pread(fd_, in.data(), in.size(), static_cast<off_t>(compressed_read));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        problem = fmt::format("read error after {} compressed bytes: {}", compressed_read, std::strerror(errno));
        break;
      }
      if (n == 0) {
        if (in_member) problem = fmt::format("the gzip data is truncated: it ends after {} bytes inside a compressed stream", compressed_read);
        break;
      }
      compressed_read += static_cast<uint64_t>(n);
      z.next_in = in.data();
      z.avail_in = static_cast<uInt>(n);
    }
    z.next_out = reinterpret_cast<Bytef*>(block.data() + filled);
    z.avail_out = static_cast<uInt>(block.size() - filled);
    in_member = true;
    int rc = inflate(&z, Z_NO_FLUSH);
    filled = block.size() - z.avail_out;
    if (rc == Z_STREAM_END) {
      in_member = false;
      // Another gzip member may follow (concatenated files); skip zero padding at the end.
      while (z.avail_in > 0 && *z.next_in == 0) ++z.next_in, --z.avail_in;
      inflateReset(&z);
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      uint64_t at = compressed_read - z.avail_in;
      problem = fmt::format("the gzip data is corrupt at compressed byte {} ({})", at, z.msg != nullptr ? z.msg : "error");
      break;
    }
    if (filled == block.size() && !hand_over(false)) {
      stopped = true;
      break;
    }
  }
  inflateEnd(&z);
  if (!stopped) hand_over(true);
  finishInflating(std::move(problem));
}

}  // namespace gpuxray::load
