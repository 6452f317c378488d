#include "examples/train/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace cxxrun::examples::train {

namespace {

// Layout (native byte order; a checkpoint stays on the machines that wrote it):
//   magic[8] version:u32 run_id_len:u32 step:i64 count:u64 run_id params[count] fnv1a64
constexpr char kMagic[8] = {'C', 'X', 'R', 'T', 'R', 'A', 'I', 'N'};
constexpr uint32_t kVersion = 1;

uint64_t fnv1a(const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

template <typename T>
void put(std::string& out, const T& v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

template <typename T>
T take(const std::string& in, size_t& at, const std::string& path) {
  T v;
  if (in.size() - at < sizeof v) throw std::runtime_error("checkpoint " + path + " is truncated");
  std::memcpy(&v, in.data() + at, sizeof v);
  at += sizeof v;
  return v;
}

[[noreturn]] void io_error(const std::string& what, const std::string& path) {
  throw std::runtime_error(what + " " + path + ": " + std::strerror(errno));
}

void write_all(int fd, const std::string& bytes, const std::string& path) {
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) io_error("cannot write", path);
    done += static_cast<size_t>(n);
  }
}

// fsync of the directory makes the rename itself survive a crash.
void sync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) io_error("cannot open", dir);
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) io_error("cannot fsync", dir);
}

}  // namespace

std::string checkpoint_path(const std::string& dir) {
  return (std::filesystem::path(dir) / "train.ckpt").string();
}

void save_checkpoint(const std::string& dir, const Checkpoint& ckpt) {
  std::string bytes(kMagic, sizeof kMagic);
  put(bytes, kVersion);
  put(bytes, static_cast<uint32_t>(ckpt.run_id.size()));
  put(bytes, ckpt.step);
  put(bytes, static_cast<uint64_t>(ckpt.params.size()));
  bytes += ckpt.run_id;
  bytes.append(reinterpret_cast<const char*>(ckpt.params.data()), ckpt.params.size() * sizeof(double));
  put(bytes, fnv1a(bytes));

  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create checkpoint directory " + dir + ": " + ec.message());
  const std::string path = checkpoint_path(dir);
  // The pid keeps two writers (a stray old worker) off each other's file.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) io_error("cannot create", tmp);
  try {
    write_all(fd, bytes, tmp);
    if (::fsync(fd) != 0) io_error("cannot fsync", tmp);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int saved = errno;
    ::unlink(tmp.c_str());
    errno = saved;
    io_error("cannot rename checkpoint to", path);
  }
  sync_dir(dir);
}

std::optional<Checkpoint> load_checkpoint(const std::string& dir) {
  const std::string path = checkpoint_path(dir);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (!std::filesystem::exists(path)) return std::nullopt;
    io_error("cannot open", path);
  }
  const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    throw std::runtime_error(path + " is not a train checkpoint");
  size_t at = sizeof kMagic;
  if (take<uint32_t>(bytes, at, path) != kVersion)
    throw std::runtime_error("checkpoint " + path + " has an unknown version");
  const uint32_t id_len = take<uint32_t>(bytes, at, path);
  Checkpoint ckpt;
  ckpt.step = take<int64_t>(bytes, at, path);
  const uint64_t count = take<uint64_t>(bytes, at, path);
  // Sizes checked before use, so a corrupt count cannot ask for huge memory.
  const size_t body = sizeof(uint64_t);
  if (count > bytes.size() / sizeof(double) || bytes.size() - at != id_len + count * sizeof(double) + body)
    throw std::runtime_error("checkpoint " + path + " is truncated or has trailing bytes");
  ckpt.run_id = bytes.substr(at, id_len);
  at += id_len;
  ckpt.params.resize(count);
  std::memcpy(ckpt.params.data(), bytes.data() + at, count * sizeof(double));
  at += count * sizeof(double);
  const uint64_t stored = take<uint64_t>(bytes, at, path);
  if (stored != fnv1a(bytes.substr(0, at - sizeof stored)))
    throw std::runtime_error("checkpoint " + path + " fails its checksum");
  return ckpt;
}

}  // namespace cxxrun::examples::train
