/* A fake NVML for tests: built as libnvidia-ml.so.1, it implements exactly
 * the functions agent/health/nvml.h resolves (the clocks' too), with nvml.h's ABI (CUDA 12.6's
 * nvml.h; the recovery action field, 230, from CUDA 12.8+), and answers
 * from a text file the test writes, named by FAKE_NVML_STATE and read again
 * at every call, so a test changes the GPUs between two calls by rewriting
 * it (write a new file and rename it over the old: a reader never sees half
 * of one).
 *
 * The file: one `key=value` a line; blank lines and lines starting with #
 * are skipped. Lists are comma-separated. Sizes are bytes.
 *
 *   count=N            how many GPUs NVML reports (default: the highest
 *                      GPU index named below, plus one)
 *   init_error=R       nvmlInit_v2 returns nvmlReturn_t R (9: driver not
 *                      loaded, 18: library/driver version mismatch)
 *   slow_ms=N          every call sleeps N ms first (a hung driver)
 *   I.pci=00000000:3B:00.0   GPU I's busId (default 00000000:1I:00.0)
 *   I.uuid=GPU-...     (default GPU-00000000-0000-0000-0000-00000000000I)
 *   I.name=...         (default NVIDIA Fake H100)
 *   I.lost=1           every call naming GPU I, its handle lookups
 *                      included, returns NVML_ERROR_GPU_IS_LOST
 *   I.recovery=A       NVML_FI_DEV_GET_GPU_RECOVERY_ACTION's value
 *   I.retired_pending=1, I.remap_failure=1, I.ecc_uncorrected=N
 *   I.used=N, I.total=N      nvmlDeviceGetMemoryInfo (total: 80 GiB)
 *   I.pids=P,P         its compute processes
 *   I.xids=X,X         its Xids, in order: each is delivered once to every
 *                      event set registered for GPU I (append to add more)
 *   I.sm_clock=MHZ     nvmlDeviceGetClockInfo's SM (and graphics) clock
 *                      (default: the maximum)
 *   I.max_sm_clock=MHZ nvmlDeviceGetMaxClockInfo's (default 1980, an H100's)
 *   I.clock_reasons=B  nvmlDeviceGetCurrentClocksEventReasons' bits, and
 *                      ...ThrottleReasons' (decimal or 0x hex; 0x40 is a
 *                      hardware thermal slowdown; default 0)
 *   I.unsupported=W,W  these answer NVML_ERROR_NOT_SUPPORTED: recovery (the
 *                      field's own result, as an older driver gives it),
 *                      retired_pages, remapped_rows, ecc, events, memory,
 *                      processes, clocks (the three clock functions)
 *   I.mig_uuid=MIG-... one MIG instance on GPU I, with I.mig_used=N and
 *                      I.mig_pids=P,P (its memory and processes)
 *
 * Without the file, nvmlInit_v2 says the driver is not loaded. */
#define _GNU_SOURCE
#include <ctype.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_GPUS 16
#define MAX_LIST 64

typedef int nvmlReturn_t;
enum {
  SUCCESS = 0, UNINITIALIZED = 1, INVALID_ARGUMENT = 2, NOT_SUPPORTED = 3, NOT_FOUND = 6,
  INSUFFICIENT_SIZE = 7, DRIVER_NOT_LOADED = 9, TIMEOUT = 10, GPU_IS_LOST = 15
};
enum { XID_EVENT = 0x8, RECOVERY_FIELD = 230, UNCORRECTED = 1, VOLATILE = 0 };
enum { NO_RECOVERY = 1, NO_RETIRED = 2, NO_REMAP = 4, NO_ECC = 8, NO_EVENTS = 16, NO_MEMORY = 32, NO_PROCESSES = 64, NO_CLOCKS = 128 };

struct nvmlDevice_st { int index; int mig; };
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned pid; unsigned long long usedGpuMemory; unsigned gpuInstanceId, computeInstanceId; } nvmlProcessInfo_t;
typedef struct {
  unsigned fieldId, scopeId;
  long long timestamp, latencyUsec;
  int valueType;
  nvmlReturn_t nvmlReturn;
  union { double d; unsigned ui; unsigned long long ull; } value;
} nvmlFieldValue_t;
typedef struct {
  nvmlDevice_t device;
  unsigned long long eventType, eventData;
  unsigned gpuInstanceId, computeInstanceId;
} nvmlEventData_t;
typedef struct nvmlEventSet_st { int registered[MAX_GPUS]; int delivered[MAX_GPUS]; } * nvmlEventSet_t;
_Static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t");
_Static_assert(sizeof(nvmlProcessInfo_t) == 24, "nvmlProcessInfo_t");
_Static_assert(sizeof(nvmlFieldValue_t) == 40, "nvmlFieldValue_t");
_Static_assert(sizeof(nvmlEventData_t) == 32, "nvmlEventData_t");

typedef struct {
  char pci[32], uuid[96], name[96], mig_uuid[96];
  int lost, retired_pending, remap_failure;
  unsigned recovery, unsupported, sm_clock, max_sm_clock;
  unsigned long long clock_reasons;
  unsigned long long ecc, used, total, mig_used;
  unsigned long long pids[MAX_LIST], mig_pids[MAX_LIST], xids[MAX_LIST];
  int npids, nmig_pids, nxids;
} Gpu;
typedef struct { int count, init_error, slow_ms; Gpu gpus[MAX_GPUS]; } State;

static struct nvmlDevice_st gpu_handles[MAX_GPUS], mig_handles[MAX_GPUS];
static atomic_int initialised;

static int list(const char* text, unsigned long long* out) {
  int n = 0;
  for (char* end; *text && n < MAX_LIST; text = *end ? end + 1 : end) {
    out[n++] = strtoull(text, &end, 10);
    if (end == text) return n - 1;
  }
  return n;
}

static unsigned unsupported(const char* text) {
  static const char* names[] = {"recovery", "retired_pages", "remapped_rows", "ecc", "events", "memory", "processes", "clocks"};
  unsigned bits = 0;
  for (unsigned i = 0; i < sizeof names / sizeof *names; ++i)
    if (strstr(text, names[i])) bits |= 1u << i;
  return bits;
}

static void set(State* s, int i, const char* key, const char* value) {
  Gpu* g = &s->gpus[i];
  if (!strcmp(key, "pci")) snprintf(g->pci, sizeof g->pci, "%s", value);
  else if (!strcmp(key, "uuid")) snprintf(g->uuid, sizeof g->uuid, "%s", value);
  else if (!strcmp(key, "name")) snprintf(g->name, sizeof g->name, "%s", value);
  else if (!strcmp(key, "mig_uuid")) snprintf(g->mig_uuid, sizeof g->mig_uuid, "%s", value);
  else if (!strcmp(key, "lost")) g->lost = atoi(value);
  else if (!strcmp(key, "recovery")) g->recovery = (unsigned)strtoul(value, NULL, 10);
  else if (!strcmp(key, "retired_pending")) g->retired_pending = atoi(value);
  else if (!strcmp(key, "remap_failure")) g->remap_failure = atoi(value);
  else if (!strcmp(key, "ecc_uncorrected")) g->ecc = strtoull(value, NULL, 10);
  else if (!strcmp(key, "used")) g->used = strtoull(value, NULL, 10);
  else if (!strcmp(key, "total")) g->total = strtoull(value, NULL, 10);
  else if (!strcmp(key, "mig_used")) g->mig_used = strtoull(value, NULL, 10);
  else if (!strcmp(key, "pids")) g->npids = list(value, g->pids);
  else if (!strcmp(key, "mig_pids")) g->nmig_pids = list(value, g->mig_pids);
  else if (!strcmp(key, "xids")) g->nxids = list(value, g->xids);
  else if (!strcmp(key, "unsupported")) g->unsupported = unsupported(value);
  else if (!strcmp(key, "sm_clock")) g->sm_clock = (unsigned)strtoul(value, NULL, 10);
  else if (!strcmp(key, "max_sm_clock")) g->max_sm_clock = (unsigned)strtoul(value, NULL, 10);
  else if (!strcmp(key, "clock_reasons")) g->clock_reasons = strtoull(value, NULL, 0);
  else fprintf(stderr, "fake NVML: unknown key %d.%s\n", i, key);
}

/* Reads FAKE_NVML_STATE into `s`; -1 when there is no such file. */
static int load(State* s) {
  memset(s, 0, sizeof *s);
  s->count = -1;
  for (int i = 0; i < MAX_GPUS; ++i) {
    Gpu* g = &s->gpus[i];
    snprintf(g->pci, sizeof g->pci, "00000000:%02X:00.0", 0x10 + i);
    snprintf(g->uuid, sizeof g->uuid, "GPU-00000000-0000-0000-0000-%012d", i);
    snprintf(g->name, sizeof g->name, "NVIDIA Fake H100");
    g->total = 80ULL << 30;
    g->max_sm_clock = 1980;
  }
  const char* path = getenv("FAKE_NVML_STATE");
  FILE* f = path ? fopen(path, "r") : NULL;
  if (!f) return -1;
  int highest = -1;
  char line[1024];
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = '\0';
    char* eq = strchr(line, '=');
    if (line[0] == '#' || !eq) continue;
    *eq = '\0';
    const char* value = eq + 1;
    if (!strcmp(line, "count")) s->count = atoi(value);
    else if (!strcmp(line, "init_error")) s->init_error = atoi(value);
    else if (!strcmp(line, "slow_ms")) s->slow_ms = atoi(value);
    else if (isdigit((unsigned char)line[0]) && strchr(line, '.')) {
      const int i = atoi(line);
      if (i < 0 || i >= MAX_GPUS) continue;
      if (i > highest) highest = i;
      set(s, i, strchr(line, '.') + 1, value);
    } else {
      fprintf(stderr, "fake NVML: unknown key %s\n", line);
    }
  }
  fclose(f);
  for (int i = 0; i < MAX_GPUS; ++i)
    if (s->gpus[i].sm_clock == 0) s->gpus[i].sm_clock = s->gpus[i].max_sm_clock;
  if (s->count < 0 || s->count > MAX_GPUS) s->count = highest + 1;
  return 0;
}

/* The state, after slow_ms; UNINITIALIZED before nvmlInit_v2. */
static nvmlReturn_t enter(State* s) {
  if (load(s) != 0) s->count = 0;
  if (s->slow_ms > 0) usleep((useconds_t)s->slow_ms * 1000);
  return atomic_load(&initialised) > 0 ? SUCCESS : UNINITIALIZED;
}

/* The GPU `d` names (a MIG handle names its GPU's entry). */
static nvmlReturn_t device(State* s, nvmlDevice_t d, Gpu** g) {
  nvmlReturn_t r = enter(s);
  if (r != SUCCESS) return r;
  if (!d || d->index >= s->count) return INVALID_ARGUMENT;
  *g = &s->gpus[d->index];
  return (*g)->lost ? GPU_IS_LOST : SUCCESS;
}

EXPORT nvmlReturn_t nvmlInit_v2(void) {
  State s;
  if (load(&s) != 0) return DRIVER_NOT_LOADED;
  if (s.slow_ms > 0) usleep((useconds_t)s.slow_ms * 1000);
  if (s.init_error) return s.init_error;
  for (int i = 0; i < MAX_GPUS; ++i) {
    gpu_handles[i] = (struct nvmlDevice_st){i, 0};
    mig_handles[i] = (struct nvmlDevice_st){i, 1};
  }
  atomic_fetch_add(&initialised, 1);
  return SUCCESS;
}

EXPORT nvmlReturn_t nvmlShutdown(void) {
  int n = atomic_load(&initialised);
  while (n > 0 && !atomic_compare_exchange_weak(&initialised, &n, n - 1)) {}
  return n > 0 ? SUCCESS : UNINITIALIZED;
}

EXPORT const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case SUCCESS: return "Success";
    case UNINITIALIZED: return "Uninitialized";
    case INVALID_ARGUMENT: return "Invalid Argument";
    case NOT_SUPPORTED: return "Not Supported";
    case NOT_FOUND: return "Not Found";
    case INSUFFICIENT_SIZE: return "Insufficient Size";
    case DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case TIMEOUT: return "Timeout";
    case GPU_IS_LOST: return "GPU is lost";
    case 18: return "RM has detected an NVML/RM version mismatch.";
    default: return "Unknown Error";
  }
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* count) {
  State s;
  nvmlReturn_t r = enter(&s);
  if (r == SUCCESS) *count = (unsigned)s.count;
  return r;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t* out) {
  State s;
  Gpu* g;
  nvmlReturn_t r = index < MAX_GPUS ? device(&s, &gpu_handles[index], &g) : INVALID_ARGUMENT;
  if (r == SUCCESS) *out = &gpu_handles[index];
  return r;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* out) {
  State s;
  nvmlReturn_t r = enter(&s);
  if (r != SUCCESS || !uuid || !out) return r != SUCCESS ? r : INVALID_ARGUMENT;
  for (int i = 0; i < s.count; ++i) {
    const int whole = !strcmp(uuid, s.gpus[i].uuid), mig = s.gpus[i].mig_uuid[0] && !strcmp(uuid, s.gpus[i].mig_uuid);
    if (!whole && !mig) continue;
    if (s.gpus[i].lost) return GPU_IS_LOST;
    *out = whole ? &gpu_handles[i] : &mig_handles[i];
    return SUCCESS;
  }
  return NOT_FOUND;
}

EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t d, unsigned* is_mig) {
  State s;
  Gpu* g;
  nvmlReturn_t r = device(&s, d, &g);
  if (r == SUCCESS) *is_mig = (unsigned)d->mig;
  return r;
}

EXPORT nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t d, nvmlDevice_t* out) {
  State s;
  Gpu* g;
  nvmlReturn_t r = device(&s, d, &g);
  if (r == SUCCESS && !d->mig) r = INVALID_ARGUMENT;
  if (r == SUCCESS) *out = &gpu_handles[d->index];
  return r;
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t* pci) {
  State s;
  Gpu* g;
  nvmlReturn_t r = device(&s, d, &g);
  if (r != SUCCESS) return r;
  memset(pci, 0, sizeof *pci);
  snprintf(pci->busId, sizeof pci->busId, "%s", g->pci);
  sscanf(g->pci, "%x:%x:%x", &pci->domain, &pci->bus, &pci->device);
  snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", pci->domain & 0xffff, pci->bus, pci->device);
  pci->pciDeviceId = 0x233010de;
  return SUCCESS;
}

static nvmlReturn_t copy(const char* text, char* out, unsigned length) {
  if (!out || strlen(text) + 1 > length) return INSUFFICIENT_SIZE;
  memcpy(out, text, strlen(text) + 1);
  return SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* name, unsigned length) {
  State s;
  Gpu* g;
  nvmlReturn_t r = device(&s, d, &g);
  return r != SUCCESS ? r : copy(g->name, name, length);
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* uuid, unsigned length) {
  State s;
  Gpu* g;
  nvmlReturn_t r = device(&s, d, &g);
  return r != SUCCESS ? r : copy(d->mig ? g->mig_uuid : g->uuid, uuid, length);
}

EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t d, int n, nvmlFieldValue_t* values) {
  State s;
  Gpu* g;
  nvmlReturn_t r = device(&s, d, &g);
  if (r != SUCCESS) return r;
  for (int i = 0; i < n; ++i) {
    const int known = values[i].fieldId == RECOVERY_FIELD && !(g->unsupported & NO_RECOVERY);
    values[i].nvmlReturn = known ? SUCCESS : NOT_SUPPORTED;
    values[i].valueType = 1; /* NVML_VALUE_TYPE_UNSIGNED_INT */
    values[i].value.ull = 0;
    if (known) values[i].value.ui = g->recovery;
  }
  return SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t d, unsigned* pending) {
  State s;
  Gpu* g;
  nvmlReturn_t r = device(&s, d, &g);
  if (r == SUCCESS && (g->unsupported & NO_RETIRED)) r = NOT_SUPPORTED;
  if (r == SUCCESS) *pending = g->retired_pending ? 1 : 0;
  return r;
}

EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t d, unsigned* corrected, unsigned* uncorrected,
                                              unsigned* pending, unsigned* failed) {
  State s;
  Gpu* g;
  nvmlReturn_t r = device(&s, d, &g);
  if (r == SUCCESS && (g->unsupported & NO_REMAP)) r = NOT_SUPPORTED;
  if (r != SUCCESS) return r;
  *corrected = 0;
  *uncorrected = g->remap_failure ? 1 : 0;
  *pending = 0;
  *failed = g->remap_failure ? 1 : 0;
  return SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, int type, int counter, unsigned long long* count) {
  State s;
  Gpu* g;
  nvmlReturn_t r = device(&s, d, &g);
  if (r == SUCCESS && (g->unsupported & NO_ECC)) r = NOT_SUPPORTED;
  if (r == SUCCESS) *count = type == UNCORRECTED && counter == VOLATILE ? g->ecc : 0;
  return r;
}

EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  State s;
  nvmlReturn_t r = enter(&s);
  if (r == SUCCESS) *set = calloc(1, sizeof **set);
  return r;
}

EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long types, nvmlEventSet_t set) {
  State s;
  Gpu* g;
  nvmlReturn_t r = device(&s, d, &g);
  if (r == SUCCESS && ((g->unsupported & NO_EVENTS) || d->mig)) r = NOT_SUPPORTED;
  if (r == SUCCESS && (types & XID_EVENT)) set->registered[d->index] = 1;
  return r;
}

EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data, unsigned timeout_ms) {
  State s;
  nvmlReturn_t r = enter(&s);
  if (r != SUCCESS) return r;
  for (int i = 0; i < s.count; ++i) {
    if (!set->registered[i] || set->delivered[i] >= s.gpus[i].nxids) continue;
    memset(data, 0, sizeof *data);
    data->device = &gpu_handles[i];
    data->eventType = XID_EVENT;
    data->eventData = s.gpus[i].xids[set->delivered[i]++];
    data->gpuInstanceId = data->computeInstanceId = 0xFFFFFFFFu;
    return SUCCESS;
  }
  if (timeout_ms > 0) usleep((useconds_t)timeout_ms * 1000);
  return TIMEOUT;
}

EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  free(set);
  return SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t* memory) {
  State s;
  Gpu* g;
  nvmlReturn_t r = device(&s, d, &g);
  if (r == SUCCESS && (g->unsupported & NO_MEMORY)) r = NOT_SUPPORTED;
  if (r != SUCCESS) return r;
  memory->total = d->mig ? g->total / 7 : g->total;
  memory->used = d->mig ? g->mig_used : g->used;
  memory->free = memory->total > memory->used ? memory->total - memory->used : 0;
  return SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned* count, nvmlProcessInfo_t* infos) {
  State s;
  Gpu* g;
  nvmlReturn_t r = device(&s, d, &g);
  if (r == SUCCESS && (g->unsupported & NO_PROCESSES)) r = NOT_SUPPORTED;
  if (r != SUCCESS) return r;
  const int n = d->mig ? g->nmig_pids : g->npids;
  const unsigned long long* pids = d->mig ? g->mig_pids : g->pids;
  if (*count < (unsigned)n) {
    *count = (unsigned)n;
    return INSUFFICIENT_SIZE;
  }
  for (int i = 0; i < n; ++i)
    infos[i] = (nvmlProcessInfo_t){(unsigned)pids[i], (d->mig ? g->mig_used : g->used) / (unsigned)n, 0xFFFFFFFFu, 0xFFFFFFFFu};
  *count = (unsigned)n;
  return SUCCESS;
}

/* nvmlClockType_t: 0 graphics, 1 SM, 2 memory, 3 video. */
static nvmlReturn_t clock(nvmlDevice_t d, int type, unsigned* mhz, int max) {
  State s;
  Gpu* g;
  nvmlReturn_t r = device(&s, d, &g);
  if (r == SUCCESS && (g->unsupported & NO_CLOCKS)) r = NOT_SUPPORTED;
  if (r == SUCCESS && (type < 0 || type > 3)) r = INVALID_ARGUMENT;
  if (r != SUCCESS) return r;
  if (!mhz) return INVALID_ARGUMENT;
  *mhz = type <= 1 ? (max ? g->max_sm_clock : g->sm_clock) : type == 2 ? 2619 : 1755;
  return SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned* mhz) { return clock(d, type, mhz, 0); }

EXPORT nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t d, int type, unsigned* mhz) { return clock(d, type, mhz, 1); }

static nvmlReturn_t reasons(nvmlDevice_t d, unsigned long long* bits) {
  State s;
  Gpu* g;
  nvmlReturn_t r = device(&s, d, &g);
  if (r == SUCCESS && (g->unsupported & NO_CLOCKS)) r = NOT_SUPPORTED;
  if (r == SUCCESS && !bits) r = INVALID_ARGUMENT;
  if (r == SUCCESS) *bits = g->clock_reasons;
  return r;
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d, unsigned long long* bits) { return reasons(d, bits); }

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d, unsigned long long* bits) { return reasons(d, bits); }
