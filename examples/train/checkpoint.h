// examples/train's checkpoint: the step reached and the parameters after it.
//
// Rank 0 writes it to a temporary file, fsyncs and renames it over the old
// one, so a worker killed mid-write (the usual way a restart begins) leaves
// the previous checkpoint intact, never a torn one. The file carries the
// job's run id: a restarted attempt resumes only its own job's checkpoint,
// not one left in the same directory by an earlier job.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cxxrun::examples::train {

struct Checkpoint {
  int64_t step = 0;
  std::string run_id;
  std::vector<double> params;
};

// The checkpoint's file inside `dir`.
std::string checkpoint_path(const std::string& dir);

// Creates `dir` when missing. Throws std::runtime_error on I/O errors.
void save_checkpoint(const std::string& dir, const Checkpoint& ckpt);

// nullopt when there is no checkpoint file; throws std::runtime_error when
// there is one but it is truncated, corrupt or of another format.
std::optional<Checkpoint> load_checkpoint(const std::string& dir);

}  // namespace cxxrun::examples::train
