/* A worker that reports progress to cxxrun's hang detection, written in C to
 * keep worker_runtime/heartbeat.h honest as a C ABI.
 *
 *   heartbeat_demo [--steps N] [--hang-at STEP] [--timeout SECONDS]
 *
 * Each step is a section "step" with the given timeout (5 s by default) and
 * beats every 100 ms, then reports the steps done. --hang-at STEP stops beating inside that step, as a
 * stuck collective would, so the agent sees both the heartbeat and the
 * section overdue. Outside cxxrun the reporting calls do nothing. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "worker_runtime/heartbeat.h"

/* The hang ends on its own after this long, so a forgotten demo goes away. */
#define HANG_LIMIT_SECONDS 3600

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static int usage(const char* arg) {
  fprintf(stderr, "heartbeat_demo: bad argument %s\nusage: heartbeat_demo [--steps N] [--hang-at STEP] [--timeout S]\n",
          arg);
  return 2;
}

int main(int argc, char** argv) {
  long steps = 10, hang_at = -1;
  double timeout = 5.0;
  for (int i = 1; i < argc; ++i) {
    if (i + 1 >= argc) return usage(argv[i]);
    if (!strcmp(argv[i], "--steps"))
      steps = atol(argv[++i]);
    else if (!strcmp(argv[i], "--hang-at"))
      hang_at = atol(argv[++i]);
    else if (!strcmp(argv[i], "--timeout"))
      timeout = atof(argv[++i]);
    else
      return usage(argv[i]);
  }
  if (cxxrun_heartbeat_init() != 0) {
    fprintf(stderr, "heartbeat_demo: cannot attach to the heartbeat page: %s\n", strerror(errno));
    return 1;
  }
  for (long step = 0; step < steps; ++step) {
    cxxrun_section_begin("step", timeout);
    printf("heartbeat_demo pid %ld step %ld\n", (long)getpid(), step);
    fflush(stdout);
    if (step == hang_at) {
      sleep_ms(HANG_LIMIT_SECONDS * 1000L);
      return 3;
    }
    sleep_ms(100);
    cxxrun_heartbeat_beat();
    cxxrun_section_end("step");
    cxxrun_step((uint64_t)step + 1); /* steps done: the agent's view of progress */
  }
  return 0;
}
