# Written by cxxrun (agent/python/hook.h): a stack dump for hang reports,
# then the sitecustomize this one shadows.
import os as _os
import sys as _sys


def _cxxrun_register():
    path = _os.environ.get("CXXRUN_STACK_FILE")
    sig = _os.environ.get("CXXRUN_STACK_SIGNAL")
    if not path or not sig:
        return
    try:
        import _signal  # the C module: `signal` costs an `enum` import at every start
        import faulthandler

        sig = int(sig)
        if _signal.getsignal(sig) not in (_signal.SIG_DFL, None):
            return  # the program's own handler stays
        # 0600, never through a link; then moved to a high descriptor: a
        # program that closes what it inherited and opens its own files gets
        # the low numbers back. The agent checks that the descriptor still is
        # this file before it signals (agent/hang/stack_hook.h).
        fd = _os.open(path, _os.O_WRONLY | _os.O_APPEND | _os.O_CREAT | _os.O_NOFOLLOW | _os.O_CLOEXEC, 0o600)
        # Only a regular file of this user's: one another user left at the
        # name (a run directory they could replace) would get the stacks.
        st = _os.fstat(fd)
        if st.st_uid != _os.geteuid() or (st.st_mode & 0o170000) != 0o100000:
            _os.close(fd)
            return
        _os.fchmod(fd, 0o600)
        try:
            import fcntl

            high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 512)
            _os.close(fd)
            fd = high
        except Exception:
            pass
        with open("/proc/self/stat", "rb") as f:
            start = int(f.read().rsplit(b")", 1)[1].split()[19])
        faulthandler.register(sig, file=fd, all_threads=True, chain=False)
        pid = _os.getpid()
        _os.write(fd, b"cxxrun: stack dump on signal %d for pid %d\ncxxrun: pid %d started at %d dumps to fd %d\n"
                  % (sig, pid, pid, start, fd))
        real = _signal.signal

        def signal(signalnum, handler):
            # The program's own handler (or the default) replaces
            # faulthandler's: the agent then reads the stack from outside.
            previous = real(signalnum, handler)
            if signalnum == sig:
                try:
                    _os.write(fd, b"cxxrun: stack dump off for pid %d (the program set its own handler)\n" % _os.getpid())
                except OSError:
                    pass
            return previous

        _signal.signal = signal
    except Exception:
        pass


def _cxxrun_chain():
    here = _os.path.dirname(_os.path.abspath(__file__))
    me = _sys.modules.get("sitecustomize")
    try:
        # The import system's own modules, loaded already: no import cost.
        import _frozen_importlib
        import _frozen_importlib_external

        path = [p for p in _sys.path if _os.path.abspath(p or ".") != here]
        spec = _frozen_importlib_external.PathFinder.find_spec("sitecustomize", path)
        if spec is None or spec.loader is None:
            return
        module = _frozen_importlib.module_from_spec(spec)
        # `import sitecustomize` gives the user's module, as without cxxrun
        # (the import system returns what sys.modules holds once this hook ran).
        _sys.modules["sitecustomize"] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            _sys.modules["sitecustomize"] = me
            raise
    except Exception as e:
        print("cxxrun: the shadowed sitecustomize failed: %s: %s" % (type(e).__name__, e), file=_sys.stderr)


_cxxrun_register()
_cxxrun_chain()
