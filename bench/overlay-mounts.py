#!/usr/bin/env python3
"""What a nested repository's private copy costs in mounts at Full (issue 57, the monorepo goal):
one overlay per nested .git (today's layout) against one overlay of the workspace with a bind of
each nested .git from it (a candidate). Run as root, in a mount namespace of its own:

    unshare -m python3 bench/overlay-mounts.py [N]

Prints the mount and unmount time per repository for both layouts (N repositories, default 50).
A measurement for a design note, not a benchmark of the sandbox: the sandbox's own phases are in
`LOCALGPT_SANDBOX_TIMING=1` (bench/timing-steps.py).
"""
import ctypes, os, sys, time, tempfile, shutil
libc = ctypes.CDLL(None, use_errno=True)
def mount(src, tgt, fs, flags, data):
    r = libc.mount(src and src.encode(), tgt.encode(), fs and fs.encode(), ctypes.c_ulong(flags), data and data.encode())
    if r != 0: raise OSError(ctypes.get_errno(), f"mount {tgt}")
def umount(t, fl=0):
    if libc.umount2(t.encode(), fl) != 0: raise OSError(ctypes.get_errno(), "umount")
MS_BIND=4096; MS_REC=16384; MS_PRIVATE=1<<18
mount(None, "/", None, MS_REC|MS_PRIVATE, None)
base = tempfile.mkdtemp(dir="/var/tmp")
N = int(sys.argv[1]) if len(sys.argv) > 1 else 50
ws = os.path.join(base,"ws"); st = "/dev/shm/mnttest"; os.makedirs(st, exist_ok=True)
for i in range(N):
    os.makedirs(f"{ws}/r{i}/.git/objects", exist_ok=True)
    open(f"{ws}/r{i}/.git/HEAD","w").write("x")
# per-repo overlays
t0=time.perf_counter()
for i in range(N):
    u=f"{st}/u{i}"; w=f"{st}/w{i}"; os.makedirs(u); os.makedirs(w)
    mount("overlay", f"{ws}/r{i}/.git", "overlay", 0, f"lowerdir={ws}/r{i}/.git,upperdir={u},workdir={w}")
t1=time.perf_counter()
for i in range(N): umount(f"{ws}/r{i}/.git")
t2=time.perf_counter()
shutil.rmtree(st); os.makedirs(st)
# one overlay + binds
t3=time.perf_counter()
os.makedirs(f"{st}/U"); os.makedirs(f"{st}/W"); os.makedirs(f"{st}/M")
mount("overlay", f"{st}/M", "overlay", 0, f"lowerdir={ws},upperdir={st}/U,workdir={st}/W")
for i in range(N):
    mount(f"{st}/M/r{i}/.git", f"{ws}/r{i}/.git", None, MS_BIND, None)
umount(f"{st}/M", 2)
t4=time.perf_counter()
for i in range(N): umount(f"{ws}/r{i}/.git")
t5=time.perf_counter()
print(f"per-repo overlays: mount {1e6*(t1-t0)/N:.0f} us each, umount {1e6*(t2-t1)/N:.0f} us each")
print(f"one overlay + binds: mount total {1e3*(t4-t3):.2f} ms ({1e6*(t4-t3)/N:.0f} us per repo), umount {1e6*(t5-t4)/N:.0f} us each")
shutil.rmtree(st); shutil.rmtree(base)
