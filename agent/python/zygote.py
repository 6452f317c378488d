# cxxrun's forkserver (docs/forkserver.md): one interpreter per node and job
# that imports the preload list once, then forks a worker for each request
# the agent sends over descriptor 3, so a restart pays for a fork instead of
# an interpreter start and `import torch`.
#
# The agent (agent/warm/zygote.cc) runs it as `python -u -c <this> <agent pid>
# <explicit 0|1> <module,...>`. Messages on the socket, one JSON object per
# line each way:
#   zygote -> agent  {"ready": true, "preloaded": [...], "failed": [...]}
#   agent -> zygote  {"argv": [...], "env": [...], "cwd": "..."} with the
#                    worker's stdin, stdout, stderr and, where there is one,
#                    its cgroup.procs descriptor attached (SCM_RIGHTS)
#                    and, under --numa-binding, "cpus": [...] and, in node
#                    mode, "memory": {"node": N, "set_mempolicy": <syscall>}
#   zygote -> agent  {"pid": N} | {"unsafe": "why"} | {"error": "why"}
#
# A worker is a grandchild: the zygote's child forks it and exits at once, so
# the worker is re-parented to the agent (a child subreaper) and the agent
# supervises it exactly like one it started by exec.
import sys

# What an interpreter's start imported, before the zygote's own imports and
# its preload: only a module imported since can be one a worker's first
# sys.path entry would have shadowed (_shadowed).
_AT_START = frozenset(sys.modules)

import ctypes
import gc
import json
import os
import select
import socket
import time

_PR_SET_PDEATHSIG = 1
_SIGKILL = 9
_MPOL_BIND = 2


def _preload(modules, explicit):
    loaded, failed = [], []
    for name in modules:
        try:
            __import__(name)
            loaded.append(name)
        except BaseException as e:  # a module's import may even call exit()
            failed.append(name)
            if explicit:
                print(f"cxxrun: forkserver: cannot preload {name}: {type(e).__name__}: {e}",
                      file=sys.stderr, flush=True)
    return loaded, failed


# What torch 2.x's DistributedDataParallel imports the first time one is
# built (fsdp, torch._dynamo, sympy, triton: 5-7 s a worker on the GPU
# machine). With the
# default preload, the zygote imports it once it has forked a worker and
# then been idle a moment (an attempt's requests come back to back), so a
# restart finds it loaded without delaying the first start, however long
# the rendezvous takes; a learning agent's zygote, right after its preload.
# Always at idle priority: the workers it forked are starting meanwhile.
_IDLE_PRELOAD = {"torch": ["torch.distributed.fsdp", "torch._dynamo"]}
_IDLE_SECONDS = 0.2


def _idle_preload():
    torch = sys.modules.get("torch")
    version = getattr(torch, "__version__", "0")
    if not version[:1].isdigit() or int(version.split(".")[0]) < 2:
        return []  # torch 1.x's DDP imports nothing more
    return list(_IDLE_PRELOAD["torch"])


# A learning agent's zygote (the default start method) imports while the
# first attempt's workers run: under SCHED_IDLE, it takes only CPU time they
# leave, so it never slows them. It is back to SCHED_OTHER before it forks;
# an unprivileged process may go back from SCHED_IDLE at its own nice value.
# Where the kernel groups each session for CPU fairness (autogroup), the
# zygote's session would still get as much as each worker's whatever its
# class: its group's nice goes to 19 meanwhile (and back to 0: only a
# negative autogroup nice needs privilege). A forked worker starts a session,
# and with it a group, of its own.
def _idle(on):
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE if on else os.SCHED_OTHER, os.sched_param(0))
    except (AttributeError, OSError):
        pass
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write("19" if on else "0")
    except OSError:
        pass


def _preload_idle(modules, explicit, idle):
    if idle:
        _idle(True)
    try:
        return _preload(modules, explicit)
    finally:
        if idle:
            _idle(False)


# Forking a process with more than one thread copies locks another thread
# may hold; forking after CUDA was initialised gives children a broken CUDA
# context. Either way the worker would hang or crash later, far from here.
def _unsafe():
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        return f"the forkserver has {threads} threads"
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    if cuda is not None and hasattr(cuda, "is_initialized") and cuda.is_initialized():
        return "the forkserver has initialised CUDA"
    if hasattr(os, "SCHED_IDLE") and os.sched_getscheduler(0) == os.SCHED_IDLE:
        return "the forkserver cannot leave the idle scheduling class it preloaded in"
    return None


def _send(sock, message):
    sock.sendall((json.dumps(message) + "\n").encode())


class _Requests:
    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    # The descriptors ride on the request's first bytes; the rest of a long
    # environment may follow in later reads.
    def next(self):
        fds = []
        while b"\n" not in self.buf:
            data, more, _, _ = socket.recv_fds(self.sock, 1 << 16, 8)
            fds += more
            if not data:
                for fd in fds:
                    os.close(fd)
                return None, []
            self.buf += data
        line, _, self.buf = self.buf.partition(b"\n")
        return json.loads(line), fds


def _close(fds):
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


# Returns only in a new worker, with what it is to run; the zygote itself
# serves until the agent closes the socket.
def _serve(sock, agent, later, idle):
    requests = _Requests(sock)
    # A learning agent's zygote serves no first attempt: what DDP imports
    # lazily is loaded at once, while the workers that taught it run, so a
    # restart's workers find it (torch 2.11: 5-7 s a worker otherwise).
    forked = idle
    while True:
        if forked and later and not requests.buf and not select.select([sock], [], [], _IDLE_SECONDS)[0]:
            _preload_idle([later.pop(0)], False, True)
            gc.freeze()
            continue
        request, fds = requests.next()
        if request is None:
            os._exit(0)
        why = _unsafe()
        if why is not None:
            _close(fds)
            _send(sock, {"unsafe": why})
            continue
        if len(fds) not in (3, 4):
            _close(fds)
            _send(sock, {"error": f"expected 3 or 4 descriptors, got {len(fds)}"})
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        forked = True
        r, w = os.pipe()
        child = os.fork()
        if child == 0:
            os.close(r)
            worker = os.fork()
            if worker == 0:
                os.close(w)
                sock.close()
                _become_worker(request, fds, agent)
                return request
            os.write(w, worker.to_bytes(4, "little"))
            os._exit(0)
        os.close(w)
        data = os.read(r, 4)
        os.close(r)
        _close(fds)
        # The answer first: the child's exit (unmapping all torch mapped, 8
        # ms of a fork's 23 here) is not on an attempt's way. The worker is
        # the agent's once it has; the agent reaps whenever it exits.
        if len(data) == 4:
            _send(sock, {"pid": int.from_bytes(data, "little")})
        else:
            _send(sock, {"error": "the forkserver's child died before forking the worker"})
        os.waitpid(child, 0)


def _fail(message):
    os.write(2, f"cxxrun: forkserver: {message}\n".encode())
    os._exit(127)


def _become_worker(request, fds, agent):
    os.setsid()
    stdin, stdout, stderr = fds[:3]
    for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
        os.dup2(fd, target)
    if len(fds) == 4:
        # Before any user code runs, so all it starts stays in the attempt's
        # cgroup.
        try:
            os.write(fds[3], b"0")
        except OSError as e:
            _fail(f"cannot move the worker into its cgroup: {e.strerror}")
    _close(fds)
    _bind(request)
    # Its parent exits at once; only then is the agent its parent, and only
    # then may it ask to die with the agent (a death signal set earlier would
    # fire when that parent exits).
    for _ in range(2000):
        if os.getppid() == agent:
            break
        time.sleep(0.0005)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0)
    if os.getppid() != agent:
        os._exit(127)  # the agent is gone
    os.environ.clear()
    for entry in request["env"]:
        name, _, value = entry.partition("=")
        os.environ[name] = value
    _show_as_worker(libc, request["argv"], request["env"])
    _reset_forwarded_signals()
    try:
        os.chdir(request["cwd"])
    except OSError as e:
        _fail(f"cannot change to {request['cwd']}: {e.strerror}")
    # A forked numpy would give every rank the same "random" numbers; Python's
    # own random module reseeds itself after a fork.
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        numpy_random.seed()
    # multiprocessing draws the key its connections authenticate with once,
    # at import: every rank forked from a zygote that imported it (torch
    # does) would share one, where each exec'd interpreter has its own.
    process = sys.modules.get("multiprocessing.process")
    if process is not None:
        process.current_process().authkey = os.urandom(32)


_PR_SET_MM, _PR_SET_MM_MAP = 35, 14


class _MmMap(ctypes.Structure):  # struct prctl_mm_map, <linux/prctl.h>
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "start_code", "end_code", "start_data", "end_data", "start_brk", "brk", "start_stack",
        "arg_start", "arg_end", "env_start", "env_end", "auxv")] + [
        ("auxv_size", ctypes.c_uint32), ("exe_fd", ctypes.c_uint32)]


_shown = None  # the worker's argv and environment as /proc shows them; never freed


# `ps`, /proc/<pid>/cmdline and /proc/<pid>/environ show the worker's command
# and environment, as for an exec'd worker, not the zygote's: what an SRE
# greps for and what tools that find ranks by RANK= in environ read. The
# kernel reads both from address ranges it keeps per process; PR_SET_MM_MAP
# points them at a copy of the worker's (every other range as it is), and
# needs no privilege. Where the kernel refuses it (built without
# checkpoint/restore, a seccomp filter), /proc keeps the zygote's.
def _show_as_worker(libc, argv, env):
    global _shown
    try:
        with open("/proc/self/stat") as f:
            stat = f.read()
        fields = stat[stat.rindex(")") + 2:].split()
        field = lambda n: int(fields[n - 3])  # noqa: E731  (proc(5) numbers them from 1; state is 3)
        args = b"".join(os.fsencode(a) + b"\0" for a in argv)
        environ = b"".join(os.fsencode(e) + b"\0" for e in env)
        shown = ctypes.create_string_buffer(args + environ, len(args) + len(environ))
        base = ctypes.addressof(shown)
        libc.sbrk.restype = ctypes.c_void_p
        mm = _MmMap(start_code=field(26), end_code=field(27), start_data=field(45), end_data=field(46),
                    start_brk=field(47), brk=libc.sbrk(0), start_stack=field(28),
                    arg_start=base, arg_end=base + len(args),
                    env_start=base + len(args), env_end=base + len(args) + len(environ),
                    auxv=0, auxv_size=0, exe_fd=0xFFFFFFFF)
        if libc.prctl(_PR_SET_MM, _PR_SET_MM_MAP, ctypes.byref(mm), ctypes.sizeof(mm), 0) == 0:
            _shown = shown
    except (OSError, ValueError, IndexError, UnicodeEncodeError):
        pass


# --numa-binding (agent/numa/binding.h), before any user code runs, so that
# every thread the worker starts inherits it, as an exec'd worker's threads
# do. The worker has one thread here (_unsafe), so binding it binds all.
def _bind(request):
    if "cpus" in request:
        try:
            os.sched_setaffinity(0, request["cpus"])
        except OSError as e:
            _fail(f"cannot bind a worker to its CPUs (--numa-binding): {e.strerror}")
    memory = request.get("memory")
    if memory is None:
        return
    node, bits = memory["node"], 8 * ctypes.sizeof(ctypes.c_ulong)
    mask = (ctypes.c_ulong * (node // bits + 1))()
    mask[node // bits] = 1 << (node % bits)
    libc = ctypes.CDLL(None, use_errno=True)
    # The kernel reads maxnode - 1 bits.
    if libc.syscall(ctypes.c_long(memory["set_mempolicy"]), ctypes.c_long(_MPOL_BIND), mask,
                    ctypes.c_ulong(len(mask) * bits + 1)) != 0:
        _fail(f"cannot bind a worker's memory to its NUMA node (--numa-binding): "
              f"{os.strerror(ctypes.get_errno())}")


# A worker the agent execs starts with the default action for each signal
# the agent forwards to it (the agent catches them, and exec resets caught
# signals), even where cxxrun's own parent ignored them: a shell's
# `cxxrun ... &` ignores SIGINT and SIGQUIT, nohup SIGHUP. The zygote started
# before the agent caught them, so it may have inherited SIG_IGN; a worker
# that kept it would not stop when the agent forwards Ctrl-C.
def _reset_forwarded_signals():
    import signal

    for name in os.environ.get("TORCHELASTIC_SIGNALS_TO_HANDLE", "").split(","):
        name = name.strip().upper()
        sig = signal.Signals.__members__.get(name if name.startswith("SIG") else "SIG" + name)
        if sig is not None and signal.getsignal(sig) == signal.SIG_IGN:
            # For SIGINT, what `python` installs where it is not ignored.
            signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)


# Whether an import hook takes `path` as a sys.path entry (a directory, a
# zip), the test `python path` makes before it runs a file as a script.
def _is_sys_path_entry(path):
    for hook in sys.path_hooks:
        try:
            hook(path)
            return True
        except ImportError:
            pass
    return False


# What site runs at an interpreter's start, run in each worker instead of
# in the zygote (_undo_own_start): the first sitecustomize on the worker's
# sys.path (cxxrun's hook, agent/python/hook.h, which registers the worker's
# stack dump and runs the user's or the site's), then usercustomize, with
# the worker's environment, cwd and sys.argv and without the program's
# sys.path[0], as in an exec'd worker.
def _customize():
    import site

    sys.modules.pop("sitecustomize", None)
    site.execsitecustomize()
    if sys.modules.get("usercustomize", 0) is None:
        del sys.modules["usercustomize"]
        if site.ENABLE_USER_SITE:
            site.execusercustomize()


# The first module this process has that a worker whose first sys.path
# entry is `entry` would not have had: one the zygote imported (itself, or
# in its preload) while the same name is a module or package in `entry`,
# where an exec'd worker finds it first (a json.py beside the script). None
# when there is none.
def _shadowed(entry):
    from importlib.machinery import all_suffixes

    try:
        names = os.listdir(entry or ".")
    except OSError:
        return None
    suffixes = all_suffixes()
    for name in names:
        path = os.path.join(entry or ".", name)
        module = None
        if any(name.endswith(suffix) for suffix in suffixes):
            module = name.partition(".")[0]
        elif any(os.path.isfile(os.path.join(path, "__init__" + suffix)) for suffix in suffixes):
            module = name
        if not module or module not in sys.modules or module in _AT_START:
            continue
        # The same file (the entry is on PYTHONPATH too) is no other module.
        found = getattr(sys.modules[module], "__file__", None) or ""
        if module == name:
            found = os.path.dirname(found)
        if not found or os.path.realpath(found) != os.path.realpath(path):
            return module
    return None


# The worker's first sys.path entry, as _run adds it; None for none, False
# for an entry that is not a directory (a zip run as a script).
def _first_entry(args):
    if args[0] in ("-m", "-c"):
        return None if getattr(sys.flags, "safe_path", False) else os.getcwd()
    if _is_sys_path_entry(args[0]):
        return os.path.join(os.getcwd(), args[0]) if os.path.isdir(args[0]) else False
    if getattr(sys.flags, "safe_path", False):
        return None
    return os.path.dirname(os.path.realpath(args[0]))


# Runs argv ([python, -u, script | -m module | -c code, args...]) as
# `python -u` would, in a fresh __main__ module. sys.path is the worker's
# up to its first entry (the zygote's environment and cwd are the
# worker's, less per-worker variables: agent/warm/forkserver.cc), and that entry
# is added as Python adds it: the script's directory, the cwd for -m, ""
# for -c, none of them under PYTHONSAFEPATH (sys.flags.safe_path, from the
# same environment); a directory or zip run as a script is added even then.
def _run(argv):
    import builtins
    import runpy
    import types

    args = argv[1:]
    while args and args[0] == "-u":
        args = args[1:]
    # A module the zygote imported that the worker's first entry shadows
    # would be the zygote's in a forked worker, the entry's in an exec'd
    # one: this worker is exec'd then, as it is, with the same argv and
    # environment (as are those of a zip, which is not looked into).
    entry = _first_entry(args)
    if entry is False or (entry is not None and _shadowed(entry)):
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, argv)
    # What the worker's interpreter would show, not the zygote's command line.
    sys.orig_argv = list(argv)
    main = types.ModuleType("__main__")
    main.__builtins__ = builtins
    main.__annotations__ = {}  # an interpreter's __main__ starts with one
    sys.modules["__main__"] = main
    safe_path = getattr(sys.flags, "safe_path", False)
    if args[0] == "-m":
        sys.argv = ["-m"] + args[2:]
        _customize()
        if not safe_path:
            sys.path.insert(0, os.getcwd())
        runpy._run_module_as_main(args[1], alter_argv=True)
        return
    if args[0] == "-c":
        sys.argv = ["-c"] + args[2:]
        _customize()
        if not safe_path:
            sys.path.insert(0, "")
        exec(compile(args[1], "<string>", "exec"), main.__dict__)
        return
    script = args[0]
    sys.argv = args
    _customize()
    # Python 3.9+ makes the script's path absolute (cwd joined, not
    # normalised) for __file__, tracebacks and sys.path[0]; sys.argv[0] stays
    # as given.
    absolute = os.path.join(os.getcwd(), script)
    if _is_sys_path_entry(script):
        # A directory or a zip: its __main__ module runs with the entry
        # itself as sys.path[0], as under `python dir`.
        sys.path.insert(0, absolute)
        runpy._run_module_as_main("__main__", alter_argv=False)
        return
    if not safe_path:
        sys.path.insert(0, os.path.dirname(os.path.realpath(script)))
    if script.endswith(".pyc"):
        runpy.run_path(script, run_name="__main__")
        return
    from importlib.machinery import SourceFileLoader

    # Any other file is source, whatever its name ends with.
    script = absolute
    main.__file__ = script
    main.__cached__ = None
    main.__loader__ = SourceFileLoader("__main__", script)
    with open(script, "rb") as f:
        source = f.read()
    exec(compile(source, script, "exec", dont_inherit=True), main.__dict__)


# The zygote's own start, undone for its workers (its bootstrap already
# took `python -c`'s "" off sys.path, agent/warm/zygote.cc). The zygote ran a
# sitecustomize of its own, from a private directory first on its
# PYTHONPATH that this variable names: so that neither the user's
# sitecustomize nor usercustomize ran here, with the agent's environment,
# for every worker (_customize runs them in each). The directory and the
# variable go at once: no worker, nor anything the zygote starts, sees them.
_OWN_SITE = "CXXRUN_FORKSERVER_SITE"


def _undo_own_start():
    own = os.environ.pop(_OWN_SITE, "")
    if not own:
        return
    # Off PYTHONPATH too: a Python process the preload starts must not look
    # in a directory name someone may make again once it is gone.
    entries = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if entries[0] == own:
        if len(entries) > 1:
            os.environ["PYTHONPATH"] = os.pathsep.join(entries[1:])
        else:
            del os.environ["PYTHONPATH"]
    own = os.path.abspath(own)  # as site made each sys.path entry
    sys.path[:] = [p for p in sys.path if p != own]
    sys.path_importer_cache.pop(own, None)
    try:  # the agent removes it at the end otherwise
        for top, dirs, files in os.walk(own, topdown=False):
            for name in files:
                os.unlink(os.path.join(top, name))
            for name in dirs:
                os.rmdir(os.path.join(top, name))
        os.rmdir(own)
    except OSError:
        pass


def _main():
    agent = int(sys.argv[1])
    explicit = sys.argv[2] == "1"
    modules = [m for m in sys.argv[3].split(",") if m]
    idle = sys.argv[4] == "1"
    sock = socket.socket(fileno=3)
    _undo_own_start()
    loaded, failed = _preload_idle(modules, explicit, idle)
    # The preload's objects stay out of every collection: the workers keep
    # sharing their pages with the zygote, and a worker's exit does not
    # walk them (Python's advice for fork without exec, gc.freeze).
    gc.freeze()
    _send(sock, {"ready": True, "preloaded": loaded, "failed": failed})
    return _serve(sock, agent, [] if explicit else _idle_preload(), idle)


_request = _main()
try:
    _run(_request["argv"])
except SystemExit:
    raise
except BaseException as _e:
    # The traceback starts at the user's code, as under `python -u`.
    _tb = _e.__traceback__
    while _tb is not None and _tb.tb_frame.f_globals is globals():
        _tb = _tb.tb_next
    sys.excepthook(type(_e), _e.with_traceback(_tb), _tb)
    if not isinstance(_e, KeyboardInterrupt):
        sys.exit(1)
    # Uncaught, it makes the interpreter end by SIGINT after its shutdown,
    # as `python` does; its traceback was printed above, without our frames.
    sys.excepthook = lambda *_: None
    raise
