#include "examples/support/run_worker.h"

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "worker_runtime/communicator.h"
#include "worker_runtime/error_file.h"

namespace cxxrun::examples {

namespace {

// The rank from the environment, read without throwing: the failure being
// reported may be that the environment is broken.
std::string rank_label() {
  const char* rank = std::getenv("RANK");
  return rank && *rank ? std::string("rank ") + rank + ": " : std::string();
}

}  // namespace

int fail_worker(const char* program, const std::string& message) {
  const std::string line = rank_label() + message;
  worker::write_error_file(line);
  std::fprintf(stderr, "%s: %s\n", program, line.c_str());
  return 1;
}

int run_worker(const char* program, const std::function<int()>& body) {
  try {
    return body();
  } catch (const worker::EnvError& e) {
    return fail_worker(program, std::string("environment: ") + e.what());
  } catch (const worker::CollectiveError& e) {
    return fail_worker(program, std::string("collective failed: ") + e.what());
  } catch (const std::exception& e) {
    return fail_worker(program, e.what());
  }
}

}  // namespace cxxrun::examples
