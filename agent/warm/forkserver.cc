#include "agent/warm/forkserver.h"

#include <sched.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include <spdlog/spdlog.h>

#include "agent/process/cgroup.h"
#include "agent/warm/script_imports.h"
#include "agent/process/spawn.h"
#include "agent/process/worker_env_writer.h"
#include "agent/warm/zygote.h"
#include "common/env_names.h"

namespace cxxrun::agent {
namespace {

bool identifier(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

std::string read_maps(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool is_file(const std::string& path) {
  struct stat st{};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

std::vector<std::string> native_packages(std::string_view maps, bool (*exists)(const std::string& path)) {
  std::vector<std::string> out;
  std::vector<std::string> refused;
  size_t pos = 0;
  while (pos < maps.size()) {
    size_t end = maps.find('\n', pos);
    if (end == std::string_view::npos) end = maps.size();
    const std::string_view line = maps.substr(pos, end - pos);
    pos = end + 1;
    // The path is the sixth field; only files under a package directory.
    const size_t slash = line.find('/');
    if (slash == std::string_view::npos) continue;
    const std::string_view path = line.substr(slash);
    for (std::string_view dir : {std::string_view("/site-packages/"), std::string_view("/dist-packages/")}) {
      const size_t at = path.find(dir);
      if (at == std::string_view::npos) continue;
      const size_t start = at + dir.size();
      const size_t stop = path.find('/', start);
      if (stop == std::string_view::npos) break;  // a module file at the top: no package
      const std::string name(path.substr(start, stop - start));
      if (!identifier(name)) break;
      if (std::find(out.begin(), out.end(), name) != out.end() ||
          std::find(refused.begin(), refused.end(), name) != refused.end())
        break;
      // A namespace directory (nvidia's CUDA libraries) is not a package a
      // preload could import to any use.
      if (exists(std::string(path.substr(0, stop)) + "/__init__.py")) out.push_back(name);
      else refused.push_back(name);
      break;
    }
  }
  return out;
}

std::vector<std::string> preload_for(const std::vector<std::string>& packages) {
  std::vector<std::string> out;
  if (std::find(packages.begin(), packages.end(), "torch") != packages.end()) out = {"torch", "torch.distributed"};
  for (const auto& p : packages)
    if (p != "torch" && out.size() < kMaxLearned) out.push_back(p);
  return out;
}

Forkserver::Forkserver(const Config& config, std::string job_token, JobCgroup* cgroup)
    : config_(config), token_(std::move(job_token)), cgroup_(cgroup) {
  const ForkserverOptions& o = config.forkserver;
  if (o.python.empty()) return;
  if (o.learn && !o.preload_given && !o.script.empty()) {
    const std::optional<std::string> source = read_script(o.script);
    for (const ScriptImport& i : source ? top_level_imports(*source) : std::vector<ScriptImport>{}) {
      if (i.module != "torch" && i.module.rfind("torch.", 0) != 0) continue;
      const std::vector<std::string> preload = preload_for({"torch"});
      spdlog::info("forkserver: {} imports {} at its top level (line {}); its workers fork from a forkserver with "
                   "{} preloaded, imported once for the node (--start-method=spawn: never)",
                   o.script, i.module, i.line, joined(preload));
      start(preload, false, false);
      return;
    }
  }
  if (o.learn) {
    learning_ = true;
    return;
  }
  start(o.preload, o.preload_given, false);
}

Forkserver::~Forkserver() = default;

void Forkserver::learn(const std::vector<pid_t>& workers, std::chrono::milliseconds after) {
  if (!learning_) return;
  std::vector<std::string> packages;
  for (pid_t pid : workers) {
    packages = native_packages(read_maps(pid), is_file);
    if (!packages.empty()) break;
  }
  // --preload given with the default start method: that list, once the
  // workers run (nothing to learn, but the first launch stays as fast).
  const bool given = config_.forkserver.preload_given;
  if (packages.empty() && !given) return;
  learning_ = false;
  const std::vector<std::string> preload = given ? config_.forkserver.preload : preload_for(packages);
  spdlog::info("forkserver: the workers import {} ({} ms after they started); starting a forkserver with {} "
               "preloaded, so that restarts fork warm workers (--start-method=spawn: never)",
               given ? "what --preload names" : joined(packages), after.count(), joined(preload));
  start(preload, given, true);
}

bool Forkserver::settle(const std::vector<pid_t>& workers) {
  if (!zygote_ || zygote_->state() != Zygote::State::preloading || workers.empty()) return true;
  const std::string maps = read_maps(workers.front());
  const long mapped = static_cast<long>(std::count(maps.begin(), maps.end(), '\n'));
  if (mapped != mapped_) {
    mapped_ = mapped;
    same_ = 0;
    return false;
  }
  if (++same_ < kSettledLooks) return false;
  // The zygote's own way back (agent/python/zygote.py, _idle), done from here.
  const pid_t pid = zygote_->pid();
  sched_param normal{};
  sched_setscheduler(pid, SCHED_OTHER, &normal);
  std::ofstream("/proc/" + std::to_string(pid) + "/autogroup") << "0";
  spdlog::debug("forkserver: the workers are up; its preload goes on at normal priority");
  return true;
}

// Started in the job's cgroup, so that containment finds it; a zygote that
// cannot start is no reason to fail the job.
void Forkserver::start(const std::vector<std::string>& preload, bool given, bool idle) {
  EnvMap env = current_environment();
  for (const auto& [k, v] : config_.extra_env) env[k] = v;
  // The guardian's token finds it too; no attempt's token matches it.
  env[env::kJobToken] = token_ + ":forkserver";
  ForkserverOptions options = config_.forkserver;
  options.preload = preload;
  options.preload_given = given;
  CgroupTarget target;
  try {
    if (cgroup_) target = cgroup_->open_child("forkserver");
    zygote_ = std::make_unique<Zygote>(options, to_envp(env), target.dir >= 0 ? &target : nullptr, idle);
  } catch (const std::exception& e) {
    spdlog::warn("forkserver: {}; workers start by exec", e.what());
    zygote_.reset();
  }
  close_target(target);
}

}  // namespace cxxrun::agent
