/* Progress reports from a worker to the cxxrun agent, for hang detection.
 * A C ABI so that C programs and Python (ctypes) use it as well as C++:
 *
 *   cxxrun_heartbeat_init();            // once, at start
 *   for (...) {
 *     cxxrun_section_begin("step", 30); // "a step never takes over 30 s"
 *     ...; cxxrun_heartbeat_beat();     // "still alive"
 *     cxxrun_section_end("step");
 *     cxxrun_step(n);                   // "reached training step n"
 *   }
 *
 * The agent passes a shared-memory page in CXXRUN_HEARTBEAT_FILE (layout and
 * protocol: common/heartbeat_layout.h). Outside cxxrun the variable is unset
 * and every call is a cheap no-op, so the same binary runs anywhere.
 * Beats and sections are lock-free and safe from any thread and from signal
 * handlers. A child forked after init does not report for its parent. */
#ifndef CXXRUN_WORKER_RUNTIME_HEARTBEAT_H
#define CXXRUN_WORKER_RUNTIME_HEARTBEAT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Attaches to the page named by CXXRUN_HEARTBEAT_FILE. Returns 0 when
 * attached, when the variable is unset or empty (reporting stays off) and
 * when already attached; -1 with errno set when the file cannot be used
 * (errno EINVAL: not a heartbeat page). */
int cxxrun_heartbeat_init(void);

/* Marks progress: a clock read and two atomic stores. */
void cxxrun_heartbeat_beat(void);

/* Reports the training step this worker reached: any value, in any order
 * (a restart from a checkpoint goes back). A number for the agent's view of
 * progress, not a beat: the heartbeat judge never reads it. Two atomic
 * stores, from any thread. */
void cxxrun_step(uint64_t step);

/* Opens the section `name` (cut to 31 bytes) which the agent reports when it
 * is still open `timeout_seconds` after this call; <= 0 means no deadline.
 * Returns 0, 1 when reporting is off, -1 with errno ENOSPC when all 16 slots
 * are open. Sections may nest; equal names end innermost first. */
int cxxrun_section_begin(const char* name, double timeout_seconds);

/* Closes the innermost open section `name`; no effect when none is open. */
void cxxrun_section_end(const char* name);

/* Detaches; later calls are no-ops until the next init. Only when no other
 * thread is inside a call above: the page is unmapped. */
void cxxrun_heartbeat_shutdown(void);

#ifdef __cplusplus
}
#endif

#endif /* CXXRUN_WORKER_RUNTIME_HEARTBEAT_H */
