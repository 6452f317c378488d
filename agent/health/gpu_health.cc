#include "agent/health/gpu_health.h"

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "agent/health/gpu_verdict.h"
#include "agent/health/nvml.h"

namespace cxxrun::agent {

using Clock = std::chrono::steady_clock;
using namespace gpu_verdict;

struct GpuHealth::State {
  // The caller's side: whether its last job has ended, and when it began.
  std::function<bool()> last_ended;
  Clock::time_point last_asked;

  // The thread's side, under mutex.
  std::mutex mutex;
  std::condition_variable wake, exited_cv;
  std::deque<std::function<void()>> jobs;
  bool stopping = false, exited = false;
  std::string description = "NVML has not started yet";  // under mutex, for describe()

  // NVML's side: touched on its thread only.
  std::unique_ptr<nvml::Library> lib;
  std::optional<std::string> visible;
  std::chrono::milliseconds answer_within{};
  bool started = false;
  std::string start_error;
  std::vector<Gpu> gpus;
  std::string cut;  // why CUDA_VISIBLE_DEVICES's list ends early, as CUDA reads it
  nvml::EventSet events = nullptr;
  std::string events_why_not;

  std::string error(nvml::Return r) const { return lib->error(r); }

  // Runs `job` on NVML's thread, waiting at most `within`. nullopt, with
  // why in `silence`, when it does not answer in time or the caller's
  // previous job has not ended yet (then it is not queued behind that one).
  template <typename T>
  std::optional<T> ask(std::function<T()> job, std::chrono::milliseconds within, std::string& silence) {
    if (last_ended && !last_ended()) {
      silence = fmt::format("NVML has not answered for {} (a GPU or the driver hangs)", seconds(Clock::now() - last_asked));
      return std::nullopt;
    }
    auto task = std::make_shared<std::packaged_task<T()>>(std::move(job));
    std::shared_future<T> answer = task->get_future().share();
    last_ended = [answer] { return answer.wait_for(std::chrono::seconds(0)) == std::future_status::ready; };
    last_asked = Clock::now();
    {
      std::lock_guard lock(mutex);
      jobs.push_back([task] { (*task)(); });
    }
    wake.notify_one();
    if (answer.wait_for(within) != std::future_status::ready) {
      silence = fmt::format("NVML did not answer within {} (a GPU or the driver hangs)", seconds(within));
      return std::nullopt;
    }
    return answer.get();
  }

  static void serve(std::shared_ptr<State> s) {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(s->mutex);
        s->wake.wait(lock, [&] { return s->stopping || !s->jobs.empty(); });
        if (s->jobs.empty()) break;
        job = std::move(s->jobs.front());
        s->jobs.pop_front();
      }
      job();
    }
    if (s->events != nullptr) s->lib->nvmlEventSetFree(s->events);
    if (s->started) s->lib->nvmlShutdown();
    std::lock_guard lock(s->mutex);
    s->exited = true;
    s->exited_cv.notify_all();
  }

  void describe_now() {
    std::string text;
    if (!started) {
      text = "NVML cannot start: " + start_error;
    } else if (gpus.empty()) {
      text = !visible ? "no GPU on this host"
             : visible->empty() ? "no GPU visible (CUDA_VISIBLE_DEVICES is empty)"
                                : fmt::format("no GPU visible (CUDA_VISIBLE_DEVICES={})", *visible);
    } else {
      std::vector<std::string> names;
      for (const Gpu& g : gpus)
        names.push_back(g.mig() ? fmt::format("{} on {}", g.named, g.pci.empty() ? short_label(g) : g.pci)
                        : g.pci.empty() ? short_label(g) : g.pci);
      text = fmt::format("{} ({})", gpus_count(gpus.size()), joined(names, ", "));
    }
    if (!cut.empty()) text += "; " + cut;
    std::lock_guard lock(mutex);
    description = std::move(text);
  }

  // Takes `h` as `g`'s: the GPU, or a MIG instance and its GPU.
  nvml::Return adopt(Gpu& g, nvml::Device h) {
    nvml::Device gpu = h;
    unsigned is_mig = 0;
    if (lib->nvmlDeviceIsMigDeviceHandle(h, &is_mig) == nvml::kSuccess && is_mig != 0)
      if (const nvml::Return r = lib->nvmlDeviceGetDeviceHandleFromMigDeviceHandle(h, &gpu); r != nvml::kSuccess)
        return r;
    g.handle = gpu;
    g.instance = h;
    if (g.index < 0) g.index = lib->index_of(gpu);
    return nvml::kSuccess;
  }

  // Gets `g` a handle if it has none yet, its PCI bus id if unknown, and
  // registers it for Xid events once. kSuccess when it answers.
  nvml::Return reach(Gpu& g) {
    if (g.handle == nullptr) {
      nvml::Device h = nullptr;
      nvml::Return r = g.by_uuid() ? lib->nvmlDeviceGetHandleByUUID(g.named.c_str(), &h)
                                   : lib->nvmlDeviceGetHandleByIndex_v2(g.index, &h);
      if (r == nvml::kSuccess) r = adopt(g, h);
      if (r != nvml::kSuccess) return r;
    }
    if (g.pci.empty()) {
      nvml::PciInfo pci{};
      if (lib->nvmlDeviceGetPciInfo_v3(g.handle, &pci) == nvml::kSuccess) g.pci = nvml::bus_id(pci);
    }
    if (events != nullptr && !g.watched) {
      const bool twin = std::any_of(gpus.begin(), gpus.end(), [&](const Gpu& o) { return o.watched && o.handle == g.handle; });
      const nvml::Return r = twin ? nvml::kSuccess
                                  : lib->nvmlDeviceRegisterEvents(g.handle, nvml::kEventTypeXidCriticalError, events);
      g.watched = r == nvml::kSuccess;
      if (!g.watched) g.unwatched_why = error(r);
    }
    return nvml::kSuccess;
  }

  // The one GPU whose UUID starts with `prefix` (CUDA takes a unique
  // prefix too); nameless when none or several do.
  Gpu by_prefix(std::string_view prefix, unsigned count) const {
    std::vector<int> matches;
    for (unsigned i = 0; prefix.starts_with("GPU-") && i < count; ++i) {
      char uuid[96] = {};
      nvml::Device d = nullptr;
      if (lib->nvmlDeviceGetHandleByIndex_v2(i, &d) == nvml::kSuccess &&
          lib->nvmlDeviceGetUUID(d, uuid, sizeof uuid) == nvml::kSuccess && std::string_view(uuid).starts_with(prefix))
        matches.push_back(static_cast<int>(i));
    }
    return matches.size() == 1 ? Gpu(std::to_string(matches[0]), matches[0]) : Gpu("");
  }

  // The GPUs CUDA_VISIBLE_DEVICES names, as the CUDA runtime reads it.
  void resolve(unsigned count) {
    gpus.clear();
    cut.clear();
    if (!visible) {
      for (unsigned i = 0; i < count; ++i) gpus.emplace_back(std::to_string(i), static_cast<int>(i));
      return;
    }
    std::set<int> whole;  // GPUs named whole, by index or UUID
    std::string_view rest = *visible;
    for (bool more = !rest.empty(); more;) {
      const auto comma = rest.find(',');
      more = comma != std::string_view::npos;
      std::string_view item = rest.substr(0, comma);
      rest = more ? rest.substr(comma + 1) : std::string_view{};
      while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
      while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
      Gpu g{std::string(item)};
      if (!g.by_uuid()) {
        const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), g.index);
        if (item.empty() || ec != std::errc() || end != item.data() + item.size() || g.index < 0 ||
            g.index >= static_cast<int>(count))
          g.index = -1;
      } else {
        nvml::Device h = nullptr;
        const nvml::Return r = lib->nvmlDeviceGetHandleByUUID(g.named.c_str(), &h);
        if (r == nvml::kSuccess && adopt(g, h) != nvml::kSuccess) g.handle = g.instance = nullptr;
        // Any other error: the GPU is there but does not answer (lost), which check() reports.
        if (r == nvml::kNotFound || r == nvml::kInvalidArgument) g = by_prefix(item, count);
      }
      const bool duplicate =
          (!g.mig() && g.index >= 0 && !whole.insert(g.index).second) ||
          (g.mig() && std::any_of(gpus.begin(), gpus.end(), [&](const Gpu& o) { return o.named == g.named; }));
      if (g.named.empty() || (!g.by_uuid() && g.index < 0) || duplicate) {
        cut = fmt::format("CUDA_VISIBLE_DEVICES ends at \"{}\", which names no further GPU, as CUDA reads it", item);
        return;
      }
      gpus.push_back(std::move(g));
    }
  }

  // nvmlInit_v2, then the GPUs the job sees; kSuccess or NVML's error.
  nvml::Return start() {
    nvml::Return r = lib->nvmlInit_v2();
    unsigned count = 0;
    if (r == nvml::kSuccess && (r = lib->nvmlDeviceGetCount_v2(&count)) != nvml::kSuccess) lib->nvmlShutdown();
    started = r == nvml::kSuccess;
    if (!started) {
      start_error = error(r);
      describe_now();
      return r;
    }
    const nvml::Return created = lib->nvmlEventSetCreate(&events);
    if (created != nvml::kSuccess) {
      events = nullptr;
      events_why_not = error(created);
    }
    resolve(count);
    for (Gpu& g : gpus) {
      nvml::Memory memory{};
      if (reach(g) == nvml::kSuccess && lib->nvmlDeviceGetMemoryInfo(g.instance, &memory) == nvml::kSuccess)
        g.before = memory.used;
    }
    describe_now();
    return r;
  }

  std::vector<GpuCheck> run_checks(unsigned long long ecc_limit);
  std::optional<GpuCheck> memory_poll(unsigned long long tolerance, bool last, Clock::duration waited);
};

std::vector<GpuCheck> GpuHealth::State::run_checks(unsigned long long ecc_limit) {
  if (!started && start() != nvml::kSuccess) return {{"gpu-answers", false, "NVML cannot start: " + start_error}};

  // 1. Every GPU answers; the others answer for the GPUs that do, once each.
  Findings answers;
  std::vector<const Gpu*> whole;
  std::set<std::string> models;
  for (Gpu& g : gpus) {
    nvml::Return r = reach(g);
    nvml::PciInfo pci{};
    char name[96] = {}, uuid[96] = {};
    if (r == nvml::kSuccess) r = lib->nvmlDeviceGetPciInfo_v3(g.handle, &pci);
    if (r == nvml::kSuccess) r = lib->nvmlDeviceGetName(g.handle, name, sizeof name);
    if (r == nvml::kSuccess) r = lib->nvmlDeviceGetUUID(g.handle, uuid, sizeof uuid);
    if (r != nvml::kSuccess) {
      answers.bad.push_back(fmt::format("{} does not answer: {}", label(g), error(r)));
      continue;
    }
    models.insert(name);
    if (std::none_of(whole.begin(), whole.end(), [&](const Gpu* o) { return o->handle == g.handle; }))
      whole.push_back(&g);
  }
  std::vector<GpuCheck> out;
  answers.checked = gpus.size();
  out.push_back(answers.verdict("gpu-answers", fmt::format("all {} answer ({})", gpus_count(gpus.size()),
                                                           joined({models.begin(), models.end()}, ", "))));
  if (gpus.empty()) out.back().detail = description;
  describe_now();  // a GPU that answers now may have been nameless at start

  // 2. No recovery action pending.
  Findings recovery;
  for (const Gpu* g : whole) {
    nvml::FieldValue field{};
    field.fieldId = nvml::kFieldGpuRecoveryAction;
    nvml::Return r = lib->nvmlDeviceGetFieldValues(g->handle, 1, &field);
    if (r == nvml::kSuccess) r = field.nvmlReturn;
    if (r != nvml::kSuccess)
      recovery.not_checked[{"recovery action", error(r)}].push_back(short_label(*g));
    else if (++recovery.checked; field.value.uiVal != nvml::kRecoveryActionNone)
      recovery.bad.push_back(fmt::format("{}: {}", label(*g, false), nvml::recovery_action_name(field.value.uiVal)));
  }
  out.push_back(recovery.verdict("gpu-recovery-action", "none pending on " + gpus_count(recovery.checked)));

  // 3. No memory error that takes a reset or service.
  Findings memory;
  memory.checked = whole.size();
  for (const Gpu* g : whole) {
    unsigned pending = 0, corrected = 0, uncorrected = 0, remap_pending = 0, remap_failed = 0;
    unsigned long long ecc = 0;
    if (nvml::Return r = lib->nvmlDeviceGetRetiredPagesPendingStatus(g->handle, &pending); r != nvml::kSuccess)
      memory.not_checked[{"retired pages", error(r)}].push_back(short_label(*g));
    else if (pending == nvml::kFeatureEnabled)
      memory.bad.push_back(fmt::format("{}: a retired page is pending: reset the GPU", label(*g, false)));
    if (nvml::Return r = lib->nvmlDeviceGetRemappedRows(g->handle, &corrected, &uncorrected, &remap_pending, &remap_failed);
        r != nvml::kSuccess)
      memory.not_checked[{"row remapping", error(r)}].push_back(short_label(*g));
    else if (remap_failed != 0)
      memory.bad.push_back(fmt::format("{}: row remapping failed: the GPU needs service", label(*g, false)));
    if (nvml::Return r = lib->nvmlDeviceGetTotalEccErrors(g->handle, nvml::kMemoryErrorTypeUncorrected,
                                                         nvml::kVolatileEcc, &ecc);
        r != nvml::kSuccess)
      memory.not_checked[{"ECC errors", error(r)}].push_back(short_label(*g));
    else if (ecc > ecc_limit)
      memory.bad.push_back(fmt::format("{}: {} uncorrected ECC error{} since its last reset (at most {} allowed)",
                                       label(*g, false), ecc, ecc == 1 ? "" : "s", ecc_limit));
  }
  const std::string ecc = ecc_limit == 0 ? "uncorrected ECC error" : fmt::format("more than {} uncorrected ECC errors", ecc_limit);
  out.push_back(memory.verdict("gpu-memory-errors", fmt::format("no retired page pending, row remapping failure or {} on {}",
                                                                ecc, gpus_count(whole.size()))));

  // 4. No Xid since the last look: drain the event set without waiting.
  Findings xids;
  std::vector<std::string> programs_own;  // said, but no reason to step out
  if (events == nullptr) {
    xids.not_checked[{"Xid events", events_why_not}].push_back("every GPU");
  } else {
    std::map<std::pair<std::string, unsigned long long>, int> seen;  // (GPU, Xid) -> times
    for (int n = 0; n < 4096; ++n) {
      nvml::EventData event{};
      const nvml::Return r = lib->nvmlEventSetWait_v2(events, &event, 0);
      if (r == nvml::kTimeout) break;
      if (r != nvml::kSuccess) {
        xids.not_checked[{"Xid events", error(r)}].push_back("every GPU");
        break;
      }
      if ((event.eventType & nvml::kEventTypeXidCriticalError) == 0) continue;
      const auto g = std::find_if(gpus.begin(), gpus.end(), [&](const Gpu& o) { return o.handle == event.device; });
      ++seen[{g != gpus.end() ? label(*g, false) : std::string("a GPU NVML did not name"), event.eventData}];
    }
    for (const auto& [where_xid, times] : seen) {
      std::string line = fmt::format("Xid {} on {}: {}{}", where_xid.second, where_xid.first,
                                     nvml::xid_meaning(where_xid.second),
                                     times > 1 ? fmt::format(" ({} times)", times) : "");
      (nvml::xid_is_programs_own(where_xid.second) ? programs_own : xids.bad).push_back(std::move(line));
    }
    for (const Gpu* g : whole)
      if (!g->watched) xids.not_checked[{"Xid events", g->unwatched_why}].push_back(short_label(*g));
      else ++xids.checked;
  }
  out.push_back(xids.verdict("gpu-xid", "no new Xid"));
  if (!programs_own.empty())
    out.back().detail = (xids.bad.empty() ? "" : out.back().detail + "; ") + joined(programs_own) +
                        " (most often the program's own fault: not held against the node)";
  return out;
}

// One look at every GPU's memory: nullopt while some GPU holds more than
// `tolerance` and this is not the `last` look; a verdict otherwise.
std::optional<GpuCheck> GpuHealth::State::memory_poll(unsigned long long tolerance, bool last, Clock::duration waited) {
  constexpr const char* kName = "gpu-memory-drained";
  if (!started && start() != nvml::kSuccess) return GpuCheck{kName, false, "NVML cannot start: " + start_error};
  std::vector<std::string> holding;
  bool over = false;
  Findings quiet;
  quiet.checked = gpus.size();
  for (Gpu& g : gpus) {
    nvml::Return r = reach(g);
    nvml::Memory memory{};
    if (r == nvml::kSuccess) r = lib->nvmlDeviceGetMemoryInfo(g.instance, &memory);
    if (r == nvml::kNotSupported || r == nvml::kNoPermission) {
      quiet.not_checked[{"memory", error(r)}].push_back(short_label(g));
      continue;
    }
    if (r != nvml::kSuccess) return GpuCheck{kName, false, fmt::format("{} does not answer: {}", label(g), error(r))};
    if (memory.used <= g.before.value_or(0) + tolerance) continue;
    over = true;
    if (!last) continue;  // who holds it matters only in the verdict
    std::vector<unsigned> pids;
    std::string who = "no compute process";
    if (r = lib->compute_pids(g.instance, pids); r != nvml::kSuccess) {
      who = "its processes unknown: " + error(r);
    } else if (const size_t n = pids.size(); n > 0) {
      std::vector<std::string> shown;
      for (size_t i = 0; i < std::min<size_t>(n, 8); ++i) shown.push_back(std::to_string(pids[i]));
      who = fmt::format("{} process{}: pid{} {}{}", n, n == 1 ? "" : "es", n == 1 ? "" : "s", joined(shown, ", "),
                        n > 8 ? ", ..." : "");
    }
    holding.push_back(fmt::format("{} still holds {} after {}, {} more than when the job started ({})", label(g),
                                  bytes(memory.used), seconds(waited), bytes(memory.used - g.before.value_or(0)), who));
  }
  if (over && !last) return std::nullopt;
  if (!holding.empty()) return GpuCheck{kName, false, joined(holding)};
  return quiet.verdict(kName, fmt::format("memory back within {} of where it was when the job started on {} in {}",
                                          bytes(tolerance), gpus_count(gpus.size()), seconds(waited)));
}

GpuHealth::GpuHealth(std::shared_ptr<State> state) : state_(std::move(state)) {}

GpuHealth::~GpuHealth() {
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_one();
  // A thread stuck in NVML is left behind: it owns its state and ends when
  // NVML lets go of it.
  std::unique_lock lock(state_->mutex);
  state_->exited_cv.wait_for(lock, state_->answer_within, [&] { return state_->exited; });
}

std::unique_ptr<GpuHealth> GpuHealth::open(const std::optional<std::string>& cuda_visible_devices,
                                           std::string& why_not, std::chrono::milliseconds answer_within) {
  why_not.clear();
  auto state = std::make_shared<State>();
  state->lib = nvml::Library::load(nvml::Library::default_path(), why_not);
  if (!state->lib) return nullptr;
  state->visible = cuda_visible_devices;
  state->answer_within = answer_within;
  std::thread(&State::serve, state).detach();
  std::unique_ptr<GpuHealth> health(new GpuHealth(state));

  std::string silence;
  const auto started = state->ask<nvml::Return>([s = state.get()] { return s->start(); }, answer_within, silence);
  // No driver, or none we may use (a container without the GPUs' device
  // files): this host has no GPUs to check. Anything else is a broken one.
  if (started && (*started == nvml::kDriverNotLoaded || *started == nvml::kNoPermission ||
                  *started == nvml::kLibraryNotFound)) {
    why_not = "no NVIDIA driver: NVML says " + state->error(*started);
    return nullptr;
  }
  if (!started) spdlog::warn("NVML: {}", silence);
  return health;
}

std::vector<GpuCheck> GpuHealth::check(unsigned long long uncorrected_ecc_limit) {
  std::string silence;
  auto checks = state_->ask<std::vector<GpuCheck>>(
      [s = state_.get(), uncorrected_ecc_limit] { return s->run_checks(uncorrected_ecc_limit); },
      state_->answer_within, silence);
  if (!checks) return {{"gpu-answers", false, silence}};
  return std::move(*checks);
}

GpuCheck GpuHealth::wait_memory_drained(std::chrono::milliseconds limit, unsigned long long tolerance_bytes) {
  constexpr auto kPollEvery = std::chrono::milliseconds(200);
  const auto start = Clock::now();
  const auto deadline = start + limit;
  for (;;) {
    const auto now = Clock::now();
    const bool last = now >= deadline;
    // Each look may take the time left, at least 100 ms, at most answer_within.
    const auto within = std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now),
                                   std::chrono::milliseconds(100), std::max(state_->answer_within, std::chrono::milliseconds(100)));
    std::string silence;
    auto verdict = state_->ask<std::optional<GpuCheck>>(
        [s = state_.get(), tolerance_bytes, last, waited = last ? Clock::duration(limit) : now - start] {
          return s->memory_poll(tolerance_bytes, last, waited);
        },
        within, silence);
    if (!verdict) return {"gpu-memory-drained", false, silence};
    if (*verdict) return std::move(**verdict);
    std::this_thread::sleep_for(std::min<Clock::duration>(kPollEvery, deadline - Clock::now()));
  }
}

std::string GpuHealth::describe() const {
  std::lock_guard lock(state_->mutex);
  return state_->description;
}

}  // namespace cxxrun::agent
