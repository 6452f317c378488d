#include "store/auth.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

namespace cxxrun::store::auth {
namespace {

constexpr std::string_view kLabel = "cxxrun-store-auth-v1";

std::string os_error(const std::string& what) { return what + ": " + std::strerror(errno); }

}  // namespace

std::string make_nonce() {
  std::string nonce(kNonceBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), static_cast<int>(nonce.size())) != 1)
    throw std::runtime_error("the random generator failed (RAND_bytes)");
  return nonce;
}

std::string proof(std::string_view token, std::string_view nonce) {
  std::string message(kLabel);
  message.append(nonce);
  std::string mac(kMacBytes, '\0');
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(),
           reinterpret_cast<unsigned char*>(mac.data()), &length) == nullptr ||
      length != kMacBytes)
    throw std::runtime_error("HMAC-SHA256 failed");
  return mac;
}

bool proof_matches(std::string_view token, std::string_view nonce, std::string_view mac) {
  if (mac.size() != kMacBytes) return false;
  const std::string expected = proof(token, nonce);
  // Constant time: how long the comparison takes says nothing about where a
  // forged MAC first differs.
  return CRYPTO_memcmp(expected.data(), mac.data(), kMacBytes) == 0;
}

std::string read_token_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(os_error("cannot read the token file " + path));
  std::string token;
  struct stat st {};
  if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw std::runtime_error("cannot read the token file " + path + ": it is a directory");
  }
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      std::string error = os_error("cannot read the token file " + path);
      ::close(fd);
      throw std::runtime_error(error);
    }
    if (n == 0) break;
    token.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (token.ends_with("\r\n"))
    token.resize(token.size() - 2);
  else if (token.ends_with('\n'))
    token.pop_back();
  if (token.empty()) throw std::runtime_error("the token file " + path + " is empty");
  return token;
}

}  // namespace cxxrun::store::auth
