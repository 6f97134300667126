#!/usr/bin/env python3
"""The timing half of scripts/bench.sh, which builds the binaries, makes the fake hosts and the
images, and runs this as `bench.py WORK ROUNDS SETS CONCURRENCY BREAKDOWN COMMIT COMPARE_DIR
HOOK_KINDS`
(run scripts/bench.sh, not this; method in docs/PERFORMANCE.md).

WORK holds a directory per set (A: this checkout; B: --compare), its binaries in bin/ and, for
a build of this project, the prestart hook's dynamic program in libexec/nvct/ (the installed
layout of scripts/build-release.sh: bin/ holds the static front), the fake hosts
(host: 8 GPUs, host64: 64) and the images (lower: busybox; lower-glibc: Debian-like). Each set is
probed for what it can run here: a set whose `nvidia-ctk cdi generate --help` lists no
`--proc-root` is a peer (upstream's toolkit), run with its own flags; its legacy scenarios need
libnvidia-container's `nvidia-container-cli`, so they are "n/a" when that is not installed.

A start is engine-style: config.json in a bundle over a fresh overlay rootfs (made before the
clock starts), `create` (through the shim where the scenario has it) with `--pid-file`, `runc
start`, wait for the container's process to exit (a pidfd, no polling), `runc delete`.
"""
import json
import os
import random
import re
import select
import shutil
import statistics
import subprocess
import sys
import threading
import time

work, rounds, sets = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
concurrency, breakdown, commit, compare = int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], sys.argv[7]
hook_kinds = int(sys.argv[8])
host, host64 = f"{work}/host", f"{work}/host64"
# --breakdown's stand-in for a hook binary (bench.sh builds the examples; we run from the root).
TIMER = os.path.abspath("target/release/examples/hook_timer")


def loadavg():
    return " ".join(open("/proc/loadavg").read().split()[:3])


def first_line(argv):
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        return (r.stdout or r.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "unknown"


def create_cost():
    """Median µs to create one empty file, and one directory, in an overlay's upper layer on
    this machine's disk (where the bench's rootfs lives): the unit of the hooks' filesystem
    work (each mount point, link and written file of a GPU container is one create)."""
    d = f"{work}/create-probe"
    for sub in ("lower", "upper", "work", "merged"):
        os.makedirs(f"{d}/{sub}")
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir={d}/lower,upperdir={d}/upper,workdir={d}/work", f"{d}/merged"],
                   check=True)
    try:
        files, dirs = [], []
        for i in range(200):
            t0 = time.perf_counter()
            os.close(os.open(f"{d}/merged/f{i}", os.O_CREAT | os.O_EXCL | os.O_RDONLY, 0o644))
            t1 = time.perf_counter()
            os.mkdir(f"{d}/merged/d{i}")
            t2 = time.perf_counter()
            files.append(t1 - t0)
            dirs.append(t2 - t1)
        return statistics.median(files) * 1e6, statistics.median(dirs) * 1e6
    finally:
        subprocess.run(["umount", f"{d}/merged"], check=True)
        shutil.rmtree(d)


def print_machine():
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), "unknown CPU")
    cgroup = "v2" if os.path.exists("/sys/fs/cgroup/cgroup.controllers") else "v1"
    print(f"machine: {cpu}; {os.cpu_count()} cores ({len(os.sched_getaffinity(0))} usable); "
          f"kernel {os.uname().release}; {first_line(['runc', '--version'])}; cgroup {cgroup}")
    print(f"load average (1, 5, 15 min) at the start: {loadavg()}")
    f, d = create_cost()
    print(f"the disk: creating an empty file in an overlay's upper layer {f:.0f} µs, a "
          f"directory {d:.0f} µs (median of 200)")
    print(f"A: this checkout ({commit}), release build, installed layout (static nvidia-cdi-hook; "
          f"the static fronts of the prestart hook, nvidia-ctk and the shim, their dynamic programs)")
    if "B" in sets:
        print(f"B: {compare} ({first_line([f'{work}/B/bin/nvidia-ctk', '--version'])})")


# --- what each set can run -------------------------------------------------------------------

def probe(s):
    """The set's abilities: {'proc_root': bool, 'legacy': None or the reason it cannot}."""
    bins = f"{work}/{s}/bin"
    r = subprocess.run([f"{bins}/nvidia-ctk", "cdi", "generate", "--help"], capture_output=True,
                       text=True)
    proc_root = "--proc-root" in r.stdout + r.stderr
    legacy = None
    if not os.access(f"{bins}/nvidia-container-runtime-hook", os.X_OK):
        legacy = "the set has no nvidia-container-runtime-hook"
    elif not proc_root and shutil.which("nvidia-container-cli") is None:
        legacy = ("its prestart hook runs nvidia-container-cli (libnvidia-container), "
                  "which is not installed here")
    return {"proc_root": proc_root, "legacy": legacy}


ABLE = {s: probe(s) for s in sets}


def generate_argv(s, h, out, hook=None):
    """`cdi generate` for set s on fake host h with the set's own flags: a peer has no
    --proc-root (upstream reads the GPUs from NVML, the fake one here) and gets none."""
    argv = [f"{work}/{s}/bin/nvidia-ctk", "cdi", "generate", "--driver-root", f"{h}/driver",
            "--dev-root", f"{h}/driver", "--output", out]
    if ABLE[s]["proc_root"]:
        argv += ["--proc-root", f"{h}/proc"]
    if hook:
        argv += ["--nvidia-cdi-hook-path", hook]
    return argv


def config(s, mode, tag, spec_dir=None, bins=None, logs=None):
    """A config.toml for set s; `logs` (a directory) turns on the debug logs of the shim and
    the prestart hook. Upstream reads the same keys (it ignores proc-root)."""
    bins = bins or f"{work}/{s}/bin"
    path = f"{work}/{s}-{tag}.toml"
    text = (f'[nvidia-container-cli]\nroot = "{host}/driver"\nproc-root = "{host}/proc"\n')
    if logs:
        text += f'debug = "{logs}/{tag}-prestart.log"\n'
    text += f'[nvidia-container-runtime]\nmode = "{mode}"\nruntimes = ["runc"]\n'
    if logs:
        text += f'debug = "{logs}/{tag}-shim.log"\nlog-level = "debug"\n'
    if spec_dir:
        text += f'[nvidia-container-runtime.modes.cdi]\nspec-dirs = ["{spec_dir}"]\n'
    text += (f'[nvidia-container-runtime-hook]\npath = "{bins}/nvidia-container-runtime-hook"\n'
             f'[nvidia-ctk]\npath = "{bins}/nvidia-ctk"\n')
    open(path, "w").write(text)
    return path


def runc_spec():
    if os.path.exists(f"{work}/config.json"):
        os.remove(f"{work}/config.json")
    subprocess.run(["runc", "spec"], cwd=work, check=True)
    spec = json.load(open(f"{work}/config.json"))
    os.remove(f"{work}/config.json")
    spec["process"]["terminal"] = False
    spec["process"]["args"] = ["true"]
    return spec


SPEC = runc_spec()
GPU0 = ["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_DRIVER_CAPABILITIES=compute,utility"]


class NotApplicable(Exception):
    pass


def scenario(s, name, bins=None, logs=None):
    """(config.json, runtime argv prefix, env, image) for one scenario of set s, or raises
    NotApplicable with the reason the set cannot run it here."""
    spec = json.loads(json.dumps(SPEC))
    env = dict(os.environ)
    bins = bins or f"{work}/{s}/bin"
    rt = ["runc"]
    image = "lower-glibc" if name.endswith("-glibc") else "lower"
    base = name.removesuffix("-glibc")
    tag = f"{name}-{os.path.basename(os.path.dirname(bins))}"
    if base in ("hook-1", "hook-8", "hook-nogpu", "legacy-1") and ABLE[s]["legacy"]:
        raise NotApplicable(ABLE[s]["legacy"])
    if base == "shim-nogpu" and not os.access(f"{bins}/nvidia-container-runtime-hook", os.X_OK):
        # Upstream's legacy mode adds its hook to every container; without a GPU that hook
        # exits before it would run nvidia-container-cli.
        raise NotApplicable("the set has no nvidia-container-runtime-hook (legacy mode adds it)")
    if base == "hook-noop":
        # Any prestart hook at all: busybox's `true` (static), what runc itself adds for one
        # (in --breakdown, behind the timer: `hook-noop` in the breakdown copy of the set).
        spec["hooks"] = {"prestart": [{"path": f"{work}/lower/bin/busybox", "args": ["true"]}]}
        if logs:
            spec["hooks"]["prestart"][0] = {"path": f"{bins}/hook-noop", "args": ["hook-noop"]}
    elif base in ("hook-1", "hook-8", "hook-nogpu"):
        if base != "hook-nogpu":
            spec["process"]["env"] += [
                "NVIDIA_VISIBLE_DEVICES=" + ("0" if base == "hook-1" else "all"),
                "NVIDIA_DRIVER_CAPABILITIES=compute,utility"]
        spec["hooks"] = {"prestart": [{"path": f"{bins}/nvidia-container-runtime-hook",
                                       "args": ["nvidia-container-runtime-hook", "-config",
                                                config(s, "legacy", tag, bins=bins, logs=logs),
                                                "prestart"],
                                       "env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"]}]}
    elif base == "cdi":
        rt = [f"{bins}/nvidia-container-runtime"]
        spec_dir = f"{work}/{s}-{tag}-specs"
        os.makedirs(spec_dir, exist_ok=True)
        r = subprocess.run(generate_argv(s, host, f"{spec_dir}/nvidia.yaml", f"{bins}/nvidia-cdi-hook"),
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise NotApplicable(f"cdi generate failed: {r.stderr.strip()[-300:]}")
        env["NVIDIA_CTK_CONFIG_FILE_PATH"] = config(s, "cdi", tag, spec_dir, bins, logs)
        spec["process"]["env"] += ["NVIDIA_VISIBLE_DEVICES=nvidia.com/gpu=0"]
    elif base == "cdi-mounts":
        # runc alone on what the cdi scenario's shim writes into config.json, less its hooks:
        # runc's own cost of the spec's mounts and device nodes (the floor of the cdi paths).
        cspec, crt, cenv, _ = scenario(s, "cdi", bins, logs)
        d = f"{work}/{s}-cdi-mounts"
        os.makedirs(d, exist_ok=True)
        json.dump(dict(cspec, root={"path": "rootfs"}), open(f"{d}/config.json", "w"))
        cfg = f"{d}/config.toml"
        open(cfg, "w").write(open(cenv["NVIDIA_CTK_CONFIG_FILE_PATH"]).read().replace(
            'runtimes = ["runc"]', 'runtimes = ["/bin/true"]'))
        r = subprocess.run(crt + ["create", "--bundle", d, "x"], capture_output=True, text=True,
                           env=dict(cenv, NVIDIA_CTK_CONFIG_FILE_PATH=cfg))
        if r.returncode != 0:
            raise NotApplicable(f"the shim's cdi edit failed: {r.stderr.strip()[-300:]}")
        spec = json.load(open(f"{d}/config.json"))
        spec.pop("hooks", None)
        if len(spec.get("mounts", [])) <= len(SPEC.get("mounts", [])):
            raise NotApplicable("the shim's cdi edit added no mounts")
    elif base == "jit-cdi":
        rt = [f"{bins}/nvidia-container-runtime"]
        env["NVIDIA_CTK_CONFIG_FILE_PATH"] = config(s, "jit-cdi", tag, bins=bins, logs=logs)
        spec["process"]["env"] += GPU0
    elif base == "legacy-1":
        rt = [f"{bins}/nvidia-container-runtime"]
        env["NVIDIA_CTK_CONFIG_FILE_PATH"] = config(s, "legacy", tag, bins=bins, logs=logs)
        spec["process"]["env"] += GPU0
    elif base == "shim-nogpu":
        rt = [f"{bins}/nvidia-container-runtime"]
        env["NVIDIA_CTK_CONFIG_FILE_PATH"] = config(s, "legacy", tag, bins=bins, logs=logs)
    return spec, rt, env, image


# --- one start --------------------------------------------------------------------------------

counter = 0
counter_lock = threading.Lock()


def bundle(prep):
    """A bundle over a fresh overlay rootfs for prepared scenario `prep`: (dir, container id)."""
    global counter
    with counter_lock:
        counter += 1
        n = counter
    spec, _, _, image = prep
    b = f"{work}/b{n}"
    for d in ("upper", "work", "merged"):
        os.makedirs(f"{b}/{d}")
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir={work}/{image},upperdir={b}/upper,workdir={b}/work", f"{b}/merged"],
                   check=True)
    json.dump(dict(spec, root={"path": f"{b}/merged", "readonly": False}),
              open(f"{b}/config.json", "w"))
    return b, f"nvct-bench-{n}"


def remove(b):
    subprocess.run(["umount", f"{b}/merged"], check=True)
    shutil.rmtree(b)


def run(prep, b, cid):
    """create, start, wait, delete: (seconds, None) or (None, the error's last line)."""
    _, rt, env, _ = prep
    t0 = time.perf_counter()
    # The container inherits create's stdio: a file, never a pipe this process would wait on.
    with open(f"{b}.err", "w+") as err:
        ok = subprocess.run(rt + ["create", "--bundle", b, "--pid-file", f"{b}/pid", cid], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    if ok.returncode == 0:
        pidfd = os.pidfd_open(int(open(f"{b}/pid").read()))
        try:
            subprocess.run(["runc", "start", cid], check=True)
            select.select([pidfd], [], [], 30)
        finally:
            os.close(pidfd)
        subprocess.run(["runc", "delete", cid], check=True)
    t1 = time.perf_counter()
    msg = open(f"{b}.err").read().strip().splitlines()[-1:]
    os.remove(f"{b}.err")
    if ok.returncode != 0:
        return None, " ".join(msg)
    return t1 - t0, None


def start(prep):
    b, cid = bundle(prep)
    try:
        return run(prep, b, cid)
    finally:
        remove(b)


# --- statistics -------------------------------------------------------------------------------

def pct(v, q):
    """The q-th percentile of v, linear between the closest ranks."""
    v = sorted(v)
    if len(v) == 1:
        return v[0]
    k = (len(v) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def ms(x):
    return f"{x * 1000:.1f}"


# --- the rounds -------------------------------------------------------------------------------

SCENARIOS = ["runc", "hook-noop", "hook-nogpu", "hook-1", "hook-8", "legacy-1", "cdi-mounts",
             "cdi", "jit-cdi", "shim-nogpu", "hook-1-glibc", "jit-cdi-glibc"]
# Scenarios of no set: run once per round, under the first set's name (cdi-mounts: with the
# first set's spec).
SET_FREE = ("runc", "hook-noop", "cdi-mounts")


def prepare_all(names, logs=None):
    """Every scenario of every set: ({(set, name): scenario}, {(set, name): why n/a}). With
    `logs`, the sets' breakdown copies (`<set>-bd`) with debug logs in that directory."""
    prepared, na = {}, {}
    for s in sets:
        bins = f"{work}/{s}-bd/bin" if logs else None
        for name in names:
            if name in SET_FREE and s != sets[0]:
                continue
            try:
                prepared[(s, name)] = scenario(s, name, bins=bins, logs=logs)
            except NotApplicable as e:
                na[(s, name)] = str(e)
    return prepared, na


def warm_up(prepared, failed):
    """Each scenario once before the rounds: it works, and caches are warm."""
    for key in list(prepared):
        t, err = start(prepared[key])
        if t is None:
            failed[key] = err
            del prepared[key]


def rounds_of_starts():
    prepared, na = prepare_all(SCENARIOS)
    failed = {}
    warm_up(prepared, failed)
    times = {key: [None] * rounds for key in prepared}
    for r in range(rounds):
        keys = list(prepared)
        random.shuffle(keys)
        for key in keys:
            times[key][r] = start(prepared[key])[0]
    base_key = (sets[0], "runc")
    base = statistics.median([t for t in times.get(base_key, []) if t is not None] or [0])
    print(f"\n{rounds} shuffled round{'s' if rounds != 1 else ''}; engine-style start of busybox true, simulated 8-GPU host "
          f"(ms; added = median minus plain runc's median)")
    print(f"{'set':<4}{'scenario':<15}{'median':>8}{'p10':>8}{'p90':>8}{'added':>8}{'n':>5}"
          f"  added per round: median (p10–p90)")
    for name in SCENARIOS:
        for s in sets:
            key = (s, name)
            if key in times:
                v = [t for t in times[key] if t is not None]
                if not v:
                    print(f"{s:<4}{name:<15}  failed in every round")
                    continue
                added = "" if name == "runc" else ms(statistics.median(v) - base)
                # Paired: each round's start minus plain runc's in the same round, so that a
                # slow stretch (the disk's writeback) falls on both.
                diffs = [t - r for t, r in zip(times[key], times.get(base_key, []))
                         if t is not None and r is not None]
                paired = "" if name == "runc" or not diffs else (
                    f"{ms(statistics.median(diffs))} ({ms(pct(diffs, 10))}–{ms(pct(diffs, 90))})")
                print(f"{s:<4}{name:<15}{ms(statistics.median(v)):>8}{ms(pct(v, 10)):>8}"
                      f"{ms(pct(v, 90)):>8}{added:>8}{len(v):>5}  {paired}")
            elif key in na:
                print(f"{s:<4}{name:<15}  n/a: {na[key]}")
            elif key in failed:
                print(f"{s:<4}{name:<15}  failed: {failed[key]}")
    noop = [t for t in times.get((sets[0], "hook-noop"), []) if t is not None]
    if noop and base:
        print(f"\nrunc's own cost of running a prestart hook (hook-noop, a static no-op, over "
              f"runc): {ms(statistics.median(noop) - base)} ms; each prestart-hook scenario "
              f"over hook-noop (the hook's own time):")
        for name in ("hook-nogpu", "hook-1", "hook-8", "hook-1-glibc"):
            for s in sets:
                v = [t for t in times.get((s, name), []) if t is not None]
                if v:
                    print(f"{s:<4}{name:<15}{ms(statistics.median(v) - statistics.median(noop)):>8}")
    mounts = [t for t in times.get((sets[0], "cdi-mounts"), []) if t is not None]
    if mounts and base:
        floor = statistics.median(mounts)
        print(f"\nrunc's own cost of the cdi spec's mounts and device nodes (cdi-mounts: {sets[0]}'s "
              f"edit of config.json without its hooks, over runc): {ms(floor - base)} ms; each "
              f"CDI scenario over cdi-mounts (the shim's and the hooks' time):")
        for name in ("cdi", "jit-cdi", "jit-cdi-glibc"):
            for s in sets:
                v = [t for t in times.get((s, name), []) if t is not None]
                if v:
                    print(f"{s:<4}{name:<15}{ms(statistics.median(v) - floor):>8}")
    if len(sets) == 2:
        print("\nper-round ratios A/B (same round): of the start time, and of the time added "
              "over that round's plain runc")
        print(f"{'scenario':<15}{'wall median':>12}{'p10':>7}{'p90':>7}"
              f"{'added median':>14}{'p10':>7}{'p90':>7}{'n':>5}")
        runc = times.get(base_key, [None] * rounds)
        for name in SCENARIOS:
            a, b = times.get(("A", name)), times.get(("B", name))
            if name in SET_FREE or a is None or b is None:
                continue
            wall = [x / y for x, y in zip(a, b) if x and y]
            added = [(x - r) / (y - r) for x, y, r in zip(a, b, runc)
                     if x and y and r and y - r > 0]
            if not wall:
                continue
            line = f"{name:<15}{statistics.median(wall):>12.2f}{pct(wall, 10):>7.2f}{pct(wall, 90):>7.2f}"
            if added:
                line += f"{statistics.median(added):>14.2f}{pct(added, 10):>7.2f}{pct(added, 90):>7.2f}"
            else:
                line += f"{'-':>14}{'':>14}"
            print(line + f"{len(wall):>5}")
    return prepared, na


# --- concurrency ------------------------------------------------------------------------------

def batch(prep, n):
    """n starts of one scenario at once: (total wall s, [per-start s], [errors])."""
    bundles = [bundle(prep) for _ in range(n)]
    results = [None] * n
    go = threading.Barrier(n + 1)

    def one(i):
        go.wait()
        results[i] = run(prep, *bundles[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    go.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    total = time.perf_counter() - t0
    for b, _ in bundles:
        remove(b)
    return total, [t for t, _ in results if t is not None], [e for t, e in results if t is None]


def concurrent_starts():
    names = ["runc", "jit-cdi", "legacy-1"]
    prepared, na = prepare_all(names)
    batches = 3
    totals = {key: [] for key in prepared}
    each = {key: [] for key in prepared}
    errors = {key: [] for key in prepared}
    for _ in range(batches):
        keys = list(prepared)
        random.shuffle(keys)
        for key in keys:
            total, v, errs = batch(prepared[key], concurrency)
            totals[key].append(total)
            each[key] += v
            errors[key] += errs
    print(f"\nconcurrency: {concurrency} containers started at once, {batches} batches per "
          f"scenario (shuffled); total = wall time of a batch (median of the batches), p50/p99 "
          f"of one start over all batches (ms)")
    print(f"{'set':<4}{'scenario':<12}{'total':>9}{'p50':>9}{'p99':>9}{'failed':>8}")
    for name in names:
        for s in sets:
            key = (s, name)
            if key in na:
                print(f"{s:<4}{name:<12}  n/a: {na[key]}")
            elif key in totals:
                v = each[key]
                p50 = ms(pct(v, 50)) if v else "-"
                p99 = ms(pct(v, 99)) if v else "-"
                print(f"{s:<4}{name:<12}{ms(statistics.median(totals[key])):>9}{p50:>9}{p99:>9}"
                      f"{len(errors[key]):>8}")
                if errors[key]:
                    print(f"      first error: {errors[key][0]}")


# --- cdi generate and peak RSS ----------------------------------------------------------------

def timed(argv, n=15):
    v = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = subprocess.run(argv, capture_output=True)
        v.append(time.perf_counter() - t0)
        if r.returncode != 0:
            return None, r.stderr.decode(errors="replace").strip()[-300:]
    return v, None


def rss(argv):
    out = f"{work}/rss"
    subprocess.run(["/usr/bin/time", "-f", "%M", "-o", out] + argv, capture_output=True)
    try:
        return f"{int(open(out).read().split()[-1]) / 1024:.1f} MiB"
    except (ValueError, IndexError, OSError):
        return "n/a"


def generate_and_rss(prepared, na):
    print("\ncdi generate (15 runs each; ms), peak RSS")
    for s in sets:
        flags = "" if ABLE[s]["proc_root"] else " (its own flags: no --proc-root, GPUs from NVML)"
        for gpus, h in ((8, host), (64, host64)):
            argv = generate_argv(s, h, f"{work}/gen-{s}.yaml")
            v, err = timed(argv)
            if v is None:
                print(f"{s:<4}cdi generate, {gpus} GPUs{flags}: failed: {err}")
            else:
                print(f"{s:<4}cdi generate, {gpus} GPUs{flags}: median {ms(statistics.median(v))} "
                      f"(p10 {ms(pct(v, 10))}, p90 {ms(pct(v, 90))}), peak RSS {rss(argv)}")
        key = (s, "hook-8")
        if key not in prepared:
            print(f"{s:<4}prestart hook, 8 GPUs: peak RSS n/a: {na.get(key, 'it failed')}")
            continue
        spec, rt, env, image = prepared[key]
        hook = spec["hooks"]["prestart"][0]
        timed_hook = dict(hook, path="/usr/bin/time",
                          args=["time", "-f", "%M", "-o", f"{work}/rss-hook", hook["path"]] + hook["args"][1:])
        start((dict(spec, hooks={"prestart": [timed_hook]}), rt, env, image))
        try:
            kib = int(open(f"{work}/rss-hook").read().split()[-1])
            print(f"{s:<4}prestart hook, 8 GPUs: peak RSS {kib / 1024:.1f} MiB")
        except (ValueError, IndexError, OSError):
            print(f"{s:<4}prestart hook, 8 GPUs: peak RSS n/a")


# --- the breakdown ----------------------------------------------------------------------------

def behind_timer(bd, name, log, flags="", pid1to0=False, arg0=None, real=None, label=None):
    """Puts examples/hook_timer in place of `bd/name` (the real binary becomes `name.real`, or
    a link to `real`): each run appends `hook-wall NAME µs` to `log`, the hook process's own
    wall time from fork to exit (see the example's header for the settings)."""
    if real:
        os.symlink(real, f"{bd}/{name}.real")
    else:
        os.rename(f"{bd}/{name}", f"{bd}/{name}.real")
    shutil.copy(TIMER, f"{bd}/{name}")
    lines = [f"log={log}", f"flags={flags}", f"pid1to0={1 if pid1to0 else 0}"]
    if arg0:
        lines.append(f"arg0={arg0}")
    if label:
        lines.append(f"name={label}")
    open(f"{bd}/{name}.timer", "w").write("\n".join(lines) + "\n")


def breakdown_bins(s, logs):
    """A copy of set s whose hook binaries stand behind examples/hook_timer: the CDI hooks
    (A's with --debug, so it logs its step timings), the prestart hook (which logs its steps
    through the config's debug file), and, in the first set, a no-op hook (busybox `true`,
    hook-noop's) for comparison."""
    shutil.copytree(f"{work}/{s}", f"{work}/{s}-bd", symlinks=True)
    bd = f"{work}/{s}-bd/bin"
    log = f"{logs}/{s}-hooks.log"
    ours = ABLE[s]["proc_root"]
    for name in ("nvidia-cdi-hook", "nvidia-ctk"):
        # For this project's hook the state's "pid":1 (runc's createContainer, from the
        # container's pid namespace) becomes 0: the timer, not the container's init, is its
        # parent, and 0 sends it down the same path as runc's direct child (stay put).
        behind_timer(bd, name, log,
                     flags="--debug" if ours and name == "nvidia-cdi-hook" else "", pid1to0=ours)
    if os.path.exists(f"{bd}/nvidia-container-runtime-hook"):
        behind_timer(bd, "nvidia-container-runtime-hook", log, label="prestart")
    if s == sets[0]:
        behind_timer(bd, "hook-noop", log, arg0="true", real=f"{work}/lower/bin/busybox", label="noop")


STEPS = re.compile(r"step timings \(us\):((?: [\w-]+=\d+)+)")
PRESTART = re.compile(r"([\d.]+) ms in all: ([^\"]*)")


def parse_steps_line(line):
    """{step: µs} of one step-timing line (ours: `step timings (us): a=1 ... total=9`; the
    prestart hook's: `9.00 ms in all: a 0.001, ...`), or None."""
    m = STEPS.search(line)
    if m:
        return {k: int(v) for k, v in (kv.split("=") for kv in m.group(1).split())}
    m = PRESTART.search(line)
    if m:
        steps = {}
        for part in m.group(2).split(", "):
            name, _, value = part.rpartition(" ")
            steps[name.replace(" ", "-")] = int(float(value) * 1000)
        steps["total"] = int(float(m.group(1)) * 1000)
        return steps
    return None


CHILD = "in the container's mount namespace"


def parse_steps(path, child=False):
    """The step-timing lines of a log: a list of {step: µs}. The prestart hook logs its steps in
    the container's mount namespace on a line of their own (CHILD): those with child=True, the
    rest without."""
    if not os.path.exists(path):
        return []
    lines = [line for line in open(path) if (CHILD in line) == child]
    return [r for r in map(parse_steps_line, lines) if r is not None]


def parse_hooks(path):
    """A wrapper's log, in order: each hook process's step-timing line (this project's hooks
    with --debug) comes before its `hook-wall NAME µs` line. {name: [(steps or None, wall)]}."""
    out, pending = {}, None
    if not os.path.exists(path):
        return out
    for line in open(path):
        if line.startswith("hook-wall "):
            _, name, us = line.split()
            out.setdefault(name, []).append((pending, int(us)))
            pending = None
            continue
        steps = parse_steps_line(line)
        if steps is not None:
            pending = steps
    return out


def print_steps(title, runs):
    if not runs:
        print(f"\n{title}: no step timings logged")
        return
    print(f"\n{title} ({len(runs)} runs; µs)")
    print(f"  {'step':<24}{'median':>9}{'p10':>9}{'p90':>9}")
    names = list(dict.fromkeys(k for r in runs for k in r))
    for name in names:
        v = [r[name] for r in runs if name in r]
        print(f"  {name:<24}{statistics.median(v):>9.0f}{pct(v, 10):>9.0f}{pct(v, 90):>9.0f}")


def breakdown_mode():
    logs = f"{work}/logs"
    os.makedirs(logs)
    for s in sets:
        breakdown_bins(s, logs)
    names = ["jit-cdi", "jit-cdi-glibc", "cdi", "legacy-1", "shim-nogpu", "hook-noop", "hook-1"]
    prepared, na = prepare_all(names, logs=logs)
    failed = {}
    warm_up(prepared, failed)
    # The warm-up's lines are not counted: start the logs afresh.
    for f in os.listdir(logs):
        os.truncate(f"{logs}/{f}", 0)
    keys = list(prepared)
    counts = {}
    for _ in range(breakdown):
        random.shuffle(keys)
        for key in keys:
            # One log per scenario for the shim and the prestart hook; one hook log per set,
            # cut after every start so each scenario's hook lines stay apart.
            t, err = start(prepared[key])
            if t is None:
                failed[key] = err
            counts[key] = counts.get(key, 0) + 1
            hooks = f"{logs}/{key[0]}-hooks.log"
            if os.path.exists(hooks):
                with open(f"{logs}/{key[0]}-{key[1]}-hooks.log", "a") as out:
                    out.write(open(hooks).read())
                os.truncate(hooks, 0)
    print(f"\nbreakdown: {breakdown} starts of each scenario, debug logs on, busybox true on the "
          f"simulated 8-GPU host")
    for (s, name), reason in na.items():
        print(f"{s} {name}: n/a: {reason}")
    for (s, name), err in failed.items():
        print(f"{s} {name}: failed: {err}")
    walls = {}  # (set, scenario, hook) -> the hook process's wall times
    for s in sets:
        for name in names:
            if (s, name) not in prepared:
                continue
            tag = f"{name}-{s}-bd"
            hooks = f"{logs}/{s}-{name}-hooks.log"
            ours = ABLE[s]["proc_root"]
            for hook, runs in parse_hooks(hooks).items():
                v = [wall for _, wall in runs]
                walls[(s, name, hook)] = v
                per_start = len(v) / max(counts.get((s, name), 1), 1)
                print(f"\n{s} {name}: hook process `{hook}` ({per_start:g} per start), fork to "
                      f"exit, timed by its parent (examples/hook_timer): median "
                      f"{statistics.median(v):.0f} µs (p10 {pct(v, 10):.0f}, p90 {pct(v, 90):.0f})")
                steps = [dict(st, **{"outside-main": wall - st["total"]})
                         for st, wall in runs if st and "total" in st]
                if ours and steps:
                    print_steps(f"{s} {name}: `{hook}` steps (outside-main = wall minus total: "
                                f"fork, exec, start-up, exit)", steps)
            if not ours:
                continue  # a peer logs no step timings: its hooks' wall times only
            if name not in ("hook-noop", "hook-1"):
                print_steps(f"{s} {name}: the shim", parse_steps(f"{logs}/{tag}-shim.log"))
            if name in ("legacy-1", "hook-1"):
                prestart = parse_steps(f"{logs}/{tag}-prestart.log")
                print_steps(f"{s} {name}: the prestart hook (ms in all: ...)", prestart)
                print_steps(f"{s} {name}: the prestart hook in the container's mount namespace "
                            f"(part of its apply step)",
                            parse_steps(f"{logs}/{tag}-prestart.log", child=True))
                wall = walls.get((s, name, "prestart"))
                if wall and prestart:
                    total = statistics.median(r["total"] for r in prestart if "total" in r)
                    print(f"  outside its main (medians: process wall minus `total`; fork, "
                          f"exec, start-up, exit): {statistics.median(wall) - total:.0f} µs")
    noop = walls.get((sets[0], "hook-noop", "noop"))
    if noop:
        print(f"\nthe prestart hook's process over a no-op hook's (busybox `true`, "
              f"{statistics.median(noop):.0f} µs from fork to exit): what it adds to runc's "
              f"cost of running any hook, without the noise of a whole start")
        for s in sets:
            for name in ("hook-1", "legacy-1"):
                v = walls.get((s, name, "prestart"))
                if v:
                    print(f"{s:<4}{name:<15}{statistics.median(v) - statistics.median(noop):>8.0f} µs")


def hook_kinds_mode():
    """runc's own cost of running a hook of each kind: `runc create` alone (the container then
    removed with `delete -f`), no hook against busybox `true` as a prestart, createRuntime and
    createContainer hook, shuffled rounds, paired by round (a start's spread is several ms;
    `create` alone has less of it)."""
    kinds = ["none", "prestart", "createRuntime", "createContainer"]
    preps = {}
    for k in kinds:
        spec = json.loads(json.dumps(SPEC))
        if k != "none":
            spec["hooks"] = {k: [{"path": f"{work}/lower/bin/busybox", "args": ["true"]}]}
        preps[k] = (spec, ["runc"], dict(os.environ), "lower")
    times = {k: [] for k in kinds}
    for _ in range(hook_kinds):
        order = kinds[:]
        random.shuffle(order)
        for k in order:
            b, cid = bundle(preps[k])
            try:
                # The container inherits create's stdio: a file, never a pipe (its init holds
                # it open until `start`, so a pipe's reader would wait for ever).
                with open(f"{b}.err", "w+") as err:
                    t0 = time.perf_counter()
                    r = subprocess.run(["runc", "create", "--bundle", b, cid],
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=err)
                    t = time.perf_counter() - t0
                    err.seek(0)
                    msg = err.read().strip()[-300:]
                subprocess.run(["runc", "delete", "-f", cid], capture_output=True)
            finally:
                os.remove(f"{b}.err")
                remove(b)
            if r.returncode != 0:
                raise SystemExit(f"bench: runc create with {k} failed: {msg}")
            times[k].append(t)
    print(f"\nrunc create alone, {hook_kinds} shuffled rounds (ms): a no-op hook (busybox true) of "
          f"each kind, paired by round over no hook")
    for k in kinds:
        v = times[k]
        line = f"  {k:<16}median {ms(statistics.median(v)):>6} (p10 {ms(pct(v, 10))}, p90 {ms(pct(v, 90))})"
        if k != "none":
            d = [x - y for x, y in zip(v, times["none"])]
            line += f"; over none: {ms(statistics.median(d))} ({ms(pct(d, 10))}–{ms(pct(d, 90))})"
        print(line)


print_machine()
if breakdown:
    breakdown_mode()
elif hook_kinds:
    hook_kinds_mode()
else:
    prepared, na = rounds_of_starts()
    print(f"\nload average (1, 5, 15 min) after the rounds: {loadavg()}")
    if concurrency:
        concurrent_starts()
    generate_and_rss(prepared, na)
print(f"\nload average (1, 5, 15 min) at the end: {loadavg()}")
