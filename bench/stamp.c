/* stamp: tiny --no-python worker for the cxxrun/torchrun benchmarks.
 *
 * Usage (as the launcher's training "script"):  stamp MODE OUTDIR
 *
 * MODE restart  (restart-latency benchmark, run with --max-restarts=1)
 *   attempt = TORCHELASTIC_RESTART_COUNT, rank = LOCAL_RANK.
 *   attempt 0: every rank sleeps 300 ms (so the whole group is up); then
 *              local rank 0 writes CLOCK_REALTIME ns to OUTDIR/fail.0 and
 *              exits 1; the other ranks keep sleeping (<= 30 s) until the
 *              launcher kills them.
 *   attempt>0: CLOCK_REALTIME is read first thing in main() and written to
 *              OUTDIR/start.<attempt>.<rank>; exit 0.
 *   If TORCHELASTIC_RESTART_COUNT or LOCAL_RANK is missing, writes
 *   OUTDIR/noenv and exits 2 (so a broken launcher cannot loop forever).
 *
 * MODE rss      (peak-RSS benchmark)
 *   every rank sleeps 1 s; local rank 0 then copies the VmHWM/VmRSS lines of
 *   /proc/<getppid()>/status into OUTDIR/rss.<rank> as "ppid hwm_kB rss_kB"
 *   and all ranks exit 0.
 *
 * MODE cluster  (multi-node benchmarks, bench/elastic.py)
 *   rank = RANK. Writes OUTDIR/start.<attempt>.<group world size>.<rank> at
 *   the top of main. When TORCHELASTIC_RESTART_COUNT > 0, or GROUP_WORLD_SIZE
 *   equals $STAMP_DONE_WORLD, exits 0 there. Otherwise it waits: on SIGTERM
 *   it writes OUTDIR/term.<rank> (CLOCK_REALTIME ns) and exits; rank
 *   $STAMP_FAIL_RANK writes OUTDIR/fail.0 after 500 ms and exits 1. With
 *   $STAMP_RUN_MS set, every other rank exits 0 after that many ms
 *   (bench/etcd.py's job that must outlive an etcd leader).
 *
 * Build: cc -O2 -o stamp stamp.c      (bench/run.sh does this in a scratch dir)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static void write_file(const char *dir, const char *name, const char *text) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        perror(tmp);
        _exit(3);
    }
    size_t len = strlen(text);
    if (write(fd, text, len) != (ssize_t)len) {
        perror(tmp);
        _exit(3);
    }
    close(fd);
    rename(tmp, path); /* atomic: readers never see a partial file */
}

static long status_kb(const char *status, const char *key) {
    const char *p = strstr(status, key);
    return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

static const char *term_dir;
static char term_name[64];

/* Async-signal-safe: clock_gettime, open, write and _exit only. */
static void on_term(int sig) {
    (void)sig;
    char path[512], digits[32];
    long long t = now_ns();
    int n = 0;
    do digits[n++] = (char)('0' + t % 10); while ((t /= 10) > 0);
    char out[34];
    for (int i = 0; i < n; ++i) out[i] = digits[n - 1 - i];
    out[n++] = '\n';
    size_t len = strlen(term_dir);
    if (len + strlen(term_name) + 2 > sizeof path) _exit(0);
    memcpy(path, term_dir, len);
    path[len] = '/';
    strcpy(path + len + 1, term_name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        ssize_t w = write(fd, out, (size_t)n);
        (void)w;
        close(fd);
    }
    _exit(0);
}

static int cluster(const char *dir, long long t0) {
    const char *att_s = getenv("TORCHELASTIC_RESTART_COUNT"), *rank_s = getenv("RANK");
    const char *world_s = getenv("GROUP_WORLD_SIZE"), *done_s = getenv("STAMP_DONE_WORLD");
    const char *fail_s = getenv("STAMP_FAIL_RANK");
    if (!att_s || !rank_s || !world_s) {
        write_file(dir, "noenv", "TORCHELASTIC_RESTART_COUNT, RANK or GROUP_WORLD_SIZE missing\n");
        return 2;
    }
    int attempt = atoi(att_s), rank = atoi(rank_s), world = atoi(world_s);
    char name[64], buf[64];
    snprintf(name, sizeof name, "start.%d.%d.%d", attempt, world, rank);
    snprintf(buf, sizeof buf, "%lld\n", t0);
    write_file(dir, name, buf);
    if (attempt > 0 || (done_s && atoi(done_s) == world)) return 0;
    term_dir = dir;
    snprintf(term_name, sizeof term_name, "term.%d", rank);
    signal(SIGTERM, on_term);
    if (fail_s && atoi(fail_s) == rank) {
        sleep_ms(500);
        snprintf(buf, sizeof buf, "%lld\n", now_ns());
        write_file(dir, "fail.0", buf);
        _exit(1);
    }
    const char *run_s = getenv("STAMP_RUN_MS");
    sleep_ms(run_s ? atol(run_s) : 60000);
    return 0;
}

int main(int argc, char **argv) {
    long long t0 = now_ns(); /* first thing: the "worker exec'd" stamp */
    if (argc < 3) {
        fprintf(stderr, "usage: %s restart|rss OUTDIR\n", argv[0]);
        return 64;
    }
    const char *mode = argv[1], *dir = argv[2];
    if (strcmp(mode, "cluster") == 0) return cluster(dir, t0);
    const char *att_s = getenv("TORCHELASTIC_RESTART_COUNT");
    const char *rank_s = getenv("LOCAL_RANK");
    char name[64], buf[256];

    if (strcmp(mode, "restart") == 0) {
        if (!att_s || !rank_s) {
            write_file(dir, "noenv", "TORCHELASTIC_RESTART_COUNT or LOCAL_RANK missing\n");
            return 2;
        }
        int attempt = atoi(att_s), rank = atoi(rank_s);
        if (attempt > 0) {
            snprintf(name, sizeof name, "start.%d.%d", attempt, rank);
            snprintf(buf, sizeof buf, "%lld\n", t0);
            write_file(dir, name, buf);
            return 0;
        }
        sleep_ms(300);
        if (rank == 0) {
            long long tf = now_ns();
            snprintf(buf, sizeof buf, "%lld\n", tf);
            write_file(dir, "fail.0", buf);
            _exit(1);
        }
        sleep_ms(30000); /* killed by the launcher long before this ends */
        return 0;
    }

    if (strcmp(mode, "rss") == 0) {
        int rank = rank_s ? atoi(rank_s) : -1;
        sleep_ms(1000);
        if (rank == 0) {
            pid_t pp = getppid();
            char path[64], status[8192];
            snprintf(path, sizeof path, "/proc/%d/status", (int)pp);
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            ssize_t n = fd >= 0 ? read(fd, status, sizeof status - 1) : -1;
            if (fd >= 0) close(fd);
            status[n > 0 ? n : 0] = '\0';
            snprintf(buf, sizeof buf, "%d %ld %ld\n", (int)pp,
                     status_kb(status, "VmHWM:"), status_kb(status, "VmRSS:"));
            snprintf(name, sizeof name, "rss.%d", rank);
            write_file(dir, name, buf);
        }
        return 0;
    }

    fprintf(stderr, "stamp: unknown mode '%s'\n", mode);
    return 64;
}
