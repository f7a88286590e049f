"""launch.py: runs one container's process, started by the stand-in kubelet
as `python3 launch.py SPEC.json` in a session of its own: as root it enters
a private mount namespace (and UTS namespace) and mounts the volumes (bind
mounts, read-only remounts, tmpfs), else falls back to symlinks for mount
paths that do not exist; then it forks the container's argv (never a shell;
exec'd in the working folder with its environment) and stays as the
supervisor of the process group: it passes the container's exit status (or
signal) on as its own, and when the kubelet dies (PR_SET_PDEATHSIG) it kills
the whole group, so no process of a container outlives the double, not even
a SIGKILL of it. Standalone: no imports from the package."""
import ctypes
import ctypes.util
import json
import os
import signal
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG = 1


def fail(errfile, code, msg):
    try:
        with open(errfile, "w") as f:
            f.write(msg)
    except OSError:
        pass
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()
    os._exit(code)


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        spec = json.load(f)
    errfile = spec["errfile"]
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    def parent_gone(*_):
        os.killpg(0, signal.SIGKILL)  # the container's processes, and this one
        os._exit(137)

    signal.signal(signal.SIGUSR2, parent_gone)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGUSR2, 0, 0, 0)
    if os.getppid() != spec["parent"]:
        os._exit(137)  # the kubelet is already gone
    mounts = spec.get("mounts") or []
    warnings = []
    if os.geteuid() == 0 and spec.get("hostname") and libc.unshare(CLONE_NEWUTS) == 0:
        try:
            import socket
            socket.sethostname(spec["hostname"])
        except OSError:
            pass
    if mounts:
        private = False
        if os.geteuid() == 0 and libc.unshare(CLONE_NEWNS) == 0:
            if libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) == 0:
                private = True
        for m in mounts:
            if m.get("root_only") and not private:
                continue
            dst, src = m["dst"], m.get("src")
            if private:
                try:
                    if src and os.path.isfile(src):
                        os.makedirs(os.path.dirname(dst), exist_ok=True)
                        if not os.path.exists(dst):
                            open(dst, "a").close()
                    else:
                        os.makedirs(dst, exist_ok=True)
                except OSError as e:
                    fail(errfile, 128, "failed to create mount point %s: %s" % (dst, e))
                if m.get("tmpfs"):
                    rc = libc.mount(b"tmpfs", dst.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=1777")
                else:
                    rc = libc.mount(src.encode(), dst.encode(), None, MS_BIND | MS_REC, None)
                if rc != 0:
                    fail(errfile, 128, "failed to mount %s at %s: %s" % (src or "tmpfs", dst, os.strerror(ctypes.get_errno())))
                if m.get("ro") and not m.get("tmpfs"):
                    if libc.mount(None, dst.encode(), None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_REC, None) != 0:
                        fail(errfile, 128, "failed to remount %s read-only: %s" % (dst, os.strerror(ctypes.get_errno())))
            else:
                if m.get("tmpfs"):
                    if not os.path.exists(dst):
                        warnings.append("kube-double: not root: %s is not a tmpfs" % dst)
                    continue
                if os.path.lexists(dst):
                    if os.path.realpath(dst) != os.path.realpath(src):
                        warnings.append("kube-double: not root: cannot mount %s at %s (it exists); the container sees the host's %s" % (src, dst, dst))
                    continue
                try:
                    os.makedirs(os.path.dirname(dst), exist_ok=True)
                    os.symlink(src, dst)
                except OSError as e:
                    warnings.append("kube-double: not root: cannot link %s to %s: %s" % (dst, src, e))
    for w in warnings:
        sys.stderr.write(w + "\n")
    sys.stderr.flush()
    cwd = spec.get("cwd")
    if cwd:
        try:
            os.makedirs(cwd, exist_ok=True)
            os.chdir(cwd)
        except OSError as e:
            fail(errfile, 128, "failed to create containerd task: chdir to cwd (\"%s\") set in config.json failed: %s" % (cwd, e))
    argv = spec["argv"]
    env = spec["env"]
    # the kubelet's SIGTERM goes to the whole group: the container handles it,
    # the supervisor waits for the container's end
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(s, signal.SIG_IGN)
    pid = os.fork()
    if pid == 0:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGPIPE, signal.SIGUSR2):
            signal.signal(s, signal.SIG_DFL)
        child(errfile, argv, env)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except ChildProcessError:
            os._exit(128)
    if os.WIFEXITED(status):
        os._exit(os.WEXITSTATUS(status))
    sig = os.WTERMSIG(status)
    if sig not in (signal.SIGKILL, signal.SIGSTOP):
        signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)
    os._exit(128 + sig)


def child(errfile, argv, env):
    try:
        os.execvpe(argv[0], argv, env)
    except FileNotFoundError:
        fail(errfile, 128, 'failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: "%s": executable file not found in $PATH: unknown' % argv[0])
    except PermissionError:
        fail(errfile, 128, 'failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: "%s": permission denied: unknown' % argv[0])
    except OSError as e:
        fail(errfile, 128, 'failed to create containerd task: exec: "%s": %s: unknown' % (argv[0], e))


if __name__ == "__main__":
    main()
