"""What a benchmark that storms loopback needs (bench/storm.py,
bench/rdzv_scale.py): a network namespace of its own, whose loopback is the
only interface that sees its traffic and whose kernel limits (listen backlog,
SYN backlog, port range) it may raise without touching this machine's own
network, and as many descriptors as the kernel lets it have. Root."""
import os
import resource
import subprocess
import sys

SYSCTLS = {
    "net.core.somaxconn": "65535",
    "net.ipv4.tcp_max_syn_backlog": "65535",
    "net.ipv4.ip_local_port_range": "1024 65535",
}


def enter(script):
    """Unless already inside (--inside), re-runs `script` with this process's
    arguments in a new network namespace and returns its exit code; inside,
    brings loopback up, raises the limits and returns None."""
    if "--inside" in sys.argv:
        sys.argv.remove("--inside")
        subprocess.check_call(["ip", "link", "set", "lo", "up"])
        for key, value in SYSCTLS.items():
            with open("/proc/sys/" + key.replace(".", "/"), "w") as f:
                f.write(value)
        return None
    if os.geteuid() != 0:
        raise SystemExit(f"{os.path.basename(script)}: run as root (a network namespace of its own, and its limits)")
    return subprocess.call(["unshare", "--net", "--", sys.executable, os.path.abspath(script), "--inside"] + sys.argv[1:])


def raise_nofile(n):
    """Raises RLIMIT_NOFILE to n where it may (root with CAP_SYS_RESOURCE);
    returns the soft limit it got."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, n), max(hard, n)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]
