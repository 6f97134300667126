#!/usr/bin/env bash
# The start-path benchmark (issue 13; results and method in docs/PERFORMANCE.md).
#
# Builds release binaries (the static nvidia-cdi-hook too), makes a simulated 8-GPU host and a
# 64-GPU one, and times engine-style starts of a busybox `true` (a fresh overlay rootfs, create,
# start, wait for it to stop, delete) in shuffled rounds: every scenario once per round, in a new
# random order each round, so drift and noise fall on all of them alike. Scenarios:
#   runc          plain runc, no GPU (the baseline every "added" figure is taken against)
#   hook-1        the prestart hook in config.json (legacy), GPU 0, compute+utility
#   hook-8        the same, all 8 GPUs
#   cdi           the shim in cdi mode, GPU 0 from a spec generated beforehand
#   jit-cdi       the shim in jit-cdi mode, GPU 0
#   shim-nogpu    the shim, no GPU asked for (passthrough)
#   *-glibc       hook-1 and jit-cdi again on a Debian-like image: the host's multiarch lib dir
#                 (hard links, about 1,100 files) with its ld.so.conf and ld.so.cache, where
#                 the ld cache step has a real cache and directory to deal with
# and, outside the rounds of starts, `nvidia-ctk cdi generate` on the 8- and 64-GPU hosts, and
# the peak RSS of the prestart hook and `cdi generate` (GNU time).
#
# Usage: scripts/bench.sh [--rounds N] [--compare DIR]     (as root)
#   --compare DIR: a second set of binaries (nvidia-container-runtime, -runtime-hook,
#   nvidia-cdi-hook, nvidia-ctk in DIR: another build of this project, or a peer toolkit built
#   elsewhere) timed in the same rounds; a scenario a set cannot run is reported as failed for
#   that set, the others go on.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=30
compare=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --compare) compare=$(realpath "$2"); shift 2 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "bench.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "bench.sh: run as root (it starts containers)" >&2; exit 2; }
for tool in runc busybox python3 /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "bench.sh: $tool is missing (scripts/install-deps.sh)" >&2; exit 2; }
done
if [ -n "$compare" ]; then
  for b in nvidia-container-runtime nvidia-container-runtime-hook nvidia-cdi-hook nvidia-ctk; do
    [ -x "$compare/$b" ] || { echo "bench.sh: --compare $compare has no executable $b" >&2; exit 2; }
  done
fi
cargo build --locked --release --bins --examples >/dev/null
cargo rustc --locked --release --target-dir target/static --bin nvidia-cdi-hook -- -C target-feature=+crt-static >/dev/null 2>&1
work=$(mktemp -d /tmp/nvct-bench.XXXXXX)
cleanup() { umount -R "$work"/*/merged 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$work/A"
cp target/release/nvidia-container-runtime target/release/nvidia-container-runtime-hook \
  target/release/nvidia-ctk "$work/A/"
cp target/static/release/nvidia-cdi-hook "$work/A/"
sets="A"
if [ -n "$compare" ]; then mkdir -p "$work/B"; cp "$compare"/nvidia-* "$work/B/"; sets="A B"; fi
target/release/examples/fake_host --gpus 8 "$work/host" >/dev/null
target/release/examples/fake_host --gpus 64 "$work/host64" >/dev/null
mkdir -p "$work/lower/bin"
cp "$(command -v busybox)" "$work/lower/bin/busybox"
ln -s busybox "$work/lower/bin/true"
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
mkdir -p "$work/lower-glibc/usr/lib" "$work/lower-glibc/etc"
cp -a "$work/lower/bin" "$work/lower-glibc/"
cp -al "/usr/lib/$multiarch" "$work/lower-glibc/usr/lib/" 2>/dev/null || cp -a "/usr/lib/$multiarch" "$work/lower-glibc/usr/lib/"
cp -a /etc/ld.so.conf /etc/ld.so.conf.d "$work/lower-glibc/etc/"
ldconfig -r "$work/lower-glibc"
exec python3 - "$work" "$rounds" "$sets" <<'PY'
import json, os, random, shutil, statistics, subprocess, sys, time

work, rounds, sets = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
host, host64 = f"{work}/host", f"{work}/host64"

def config(s, mode, spec_dir=None):
    path = f"{work}/{s}-{mode}.toml"
    text = (f'[nvidia-container-cli]\nroot = "{host}/driver"\nproc-root = "{host}/proc"\n'
            f'[nvidia-container-runtime]\nmode = "{mode}"\nruntimes = ["runc"]\n')
    if spec_dir:
        text += f'[nvidia-container-runtime.modes.cdi]\nspec-dirs = ["{spec_dir}"]\n'
    text += (f'[nvidia-container-runtime-hook]\npath = "{work}/{s}/nvidia-container-runtime-hook"\n'
             f'[nvidia-ctk]\npath = "{work}/{s}/nvidia-ctk"\n')
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

def scenario(s, name):
    """(config.json, runtime argv prefix, env) for one scenario of set s."""
    spec = json.loads(json.dumps(SPEC))
    env = dict(os.environ)
    bins = f"{work}/{s}"
    rt = ["runc"]
    name = name.removesuffix("-glibc")
    if name in ("hook-1", "hook-8"):
        devices = "0" if name == "hook-1" else "all"
        spec["process"]["env"] += [f"NVIDIA_VISIBLE_DEVICES={devices}",
                                   "NVIDIA_DRIVER_CAPABILITIES=compute,utility"]
        spec["hooks"] = {"prestart": [{"path": f"{bins}/nvidia-container-runtime-hook",
                                       "args": ["nvidia-container-runtime-hook", "-config",
                                                config(s, "legacy"), "prestart"],
                                       "env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"]}]}
    elif name in ("cdi", "jit-cdi", "shim-nogpu"):
        rt = [f"{bins}/nvidia-container-runtime"]
        if name == "cdi":
            spec_dir = f"{work}/{s}-cdi"
            os.makedirs(spec_dir, exist_ok=True)
            subprocess.run([f"{bins}/nvidia-ctk", "cdi", "generate", "--driver-root", f"{host}/driver",
                            "--dev-root", f"{host}/driver", "--proc-root", f"{host}/proc",
                            "--nvidia-cdi-hook-path", f"{bins}/nvidia-cdi-hook",
                            "--output", f"{spec_dir}/nvidia.yaml"], check=True, capture_output=True)
            env["NVIDIA_CTK_CONFIG_FILE_PATH"] = config(s, "cdi", spec_dir)
            spec["process"]["env"] += ["NVIDIA_VISIBLE_DEVICES=nvidia.com/gpu=0"]
        elif name == "jit-cdi":
            env["NVIDIA_CTK_CONFIG_FILE_PATH"] = config(s, "jit-cdi")
            spec["process"]["env"] += ["NVIDIA_VISIBLE_DEVICES=0",
                                       "NVIDIA_DRIVER_CAPABILITIES=compute,utility"]
        else:
            env["NVIDIA_CTK_CONFIG_FILE_PATH"] = config(s, "legacy")
    return spec, rt, env

SCENARIOS = ["runc", "hook-1", "hook-8", "cdi", "jit-cdi", "shim-nogpu", "hook-1-glibc", "jit-cdi-glibc"]
prepared = {}
for s in sets:
    for name in SCENARIOS:
        if name == "runc" and s != sets[0]:
            continue
        try:
            prepared[(s, name)] = scenario(s, name)
        except subprocess.CalledProcessError as e:
            print(f"set {s}, {name}: cannot prepare: {e.stderr.decode(errors='replace').strip()}")

counter = 0
def start(key):
    """One engine-style start; returns seconds, or None when it failed."""
    global counter
    counter += 1
    spec, rt, env = prepared[key]
    b = f"{work}/b{counter}"
    for d in ("upper", "work", "merged"):
        os.makedirs(f"{b}/{d}")
    t0 = time.perf_counter()
    lower = f"{work}/lower-glibc" if key[1].endswith("-glibc") else f"{work}/lower"
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir={lower},upperdir={b}/upper,workdir={b}/work", f"{b}/merged"], check=True)
    spec = dict(spec, root={"path": f"{b}/merged", "readonly": False})
    json.dump(spec, open(f"{b}/config.json", "w"))
    cid = f"nvct-bench-{counter}"
    # The container inherits create's stdio: a file, never a pipe this process would wait on.
    with open(f"{b}.err", "w+") as err:
        ok = subprocess.run(rt + ["create", "--bundle", b, cid], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=err)
    if ok.returncode == 0:
        subprocess.run(["runc", "start", cid], check=True)
        while json.loads(subprocess.run(["runc", "state", cid], capture_output=True).stdout or b'{"status":"stopped"}')["status"] != "stopped":
            pass
        subprocess.run(["runc", "delete", cid], check=True)
    t1 = time.perf_counter()
    subprocess.run(["umount", f"{b}/merged"], check=True)
    shutil.rmtree(b)
    err = open(f"{b}.err").read().strip().splitlines()[-1:]
    os.remove(f"{b}.err")
    if ok.returncode != 0:
        return None, err
    return t1 - t0, None

# Each scenario once before the rounds: it works, and caches are warm.
failed = {}
for key in list(prepared):
    t, err = start(key)
    if t is None:
        failed[key] = err
        del prepared[key]
times = {key: [] for key in prepared}
for _ in range(rounds):
    keys = list(prepared)
    random.shuffle(keys)
    for key in keys:
        t, err = start(key)
        if t is not None:
            times[key].append(t)

def ms(x):
    return f"{x * 1000:.1f}"

base = statistics.median(times[(sets[0], "runc")])
print(f"\n{rounds} shuffled rounds; engine-style start of busybox true on a simulated 8-GPU host")
print(f"{'set':<4}{'scenario':<12}{'median ms':>10}{'min':>8}{'max':>8}{'added ms':>10}")
for (s, name), v in times.items():
    med = statistics.median(v)
    added = "" if name == "runc" else ms(med - base)
    print(f"{s:<4}{name:<12}{ms(med):>10}{ms(min(v)):>8}{ms(max(v)):>8}{added:>10}")
for (s, name), err in failed.items():
    print(f"{s:<4}{name:<12}  failed: {' '.join(err)}")

def timed(argv, env, n=15):
    v = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = subprocess.run(argv, env=env, capture_output=True)
        v.append(time.perf_counter() - t0)
        if r.returncode != 0:
            return None, r.stderr.decode(errors="replace").strip()
    return v, None

def rss(argv, env, stdin=None):
    out = f"{work}/rss"
    subprocess.run(["/usr/bin/time", "-f", "%M", "-o", out] + argv, env=env, input=stdin,
                   capture_output=True)
    try:
        return f"{int(open(out).read().split()[-1]) / 1024:.1f} MiB"
    except (ValueError, IndexError, OSError):
        return "n/a"

print("\ncdi generate (15 runs each), peak RSS")
for s in sets:
    for gpus, h in ((8, host), (64, host64)):
        argv = [f"{work}/{s}/nvidia-ctk", "cdi", "generate", "--driver-root", f"{h}/driver",
                "--dev-root", f"{h}/driver", "--proc-root", f"{h}/proc",
                "--output", f"{work}/gen-{s}.yaml"]
        env = dict(os.environ)
        v, err = timed(argv, env)
        if v is None:
            print(f"{s:<4}cdi generate, {gpus} GPUs: failed: {err}")
        else:
            print(f"{s:<4}cdi generate, {gpus} GPUs: median {ms(statistics.median(v))} ms "
                  f"(min {ms(min(v))}, max {ms(max(v))}), peak RSS {rss(argv, env)}")
    # The prestart hook's peak RSS: one start with GNU time in front of it.
    key = (s, "hook-8")
    if key in prepared:
        spec, rt, env = prepared[key]
        hook = spec["hooks"]["prestart"][0]
        timed_hook = dict(hook, path="/usr/bin/time",
                          args=["time", "-f", "%M", "-o", f"{work}/rss-hook", hook["path"]] + hook["args"][1:])
        prepared[key] = (dict(spec, hooks={"prestart": [timed_hook]}), rt, env)
        start(key)
        try:
            kib = int(open(f"{work}/rss-hook").read().split()[-1])
            print(f"{s:<4}prestart hook, 8 GPUs: peak RSS {kib / 1024:.1f} MiB")
        except (ValueError, IndexError, OSError):
            print(f"{s:<4}prestart hook, 8 GPUs: peak RSS n/a")
PY
