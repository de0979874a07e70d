#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""examples.py - the example set-ups in examples/ parse and fit together.

  kata/configuration-qemu-vmnap.toml   TOML; the hypervisor path is the
                                       wrapper and is listed as valid; RAM
                                       on /dev/shm (listed as valid), no
                                       huge pages, virtio-fs
  kata/qemu-vmnap                      sh -n; exports what the shim reads
                                       (running it: tests/e2e/pager_backends)
  cloud-hypervisor/run-vm.sh           bash -n; --memory shared=on without
                                       hugepages; the vmnapctl options it
                                       uses exist (vmnapctl --help)
  kubernetes/vmnapd-daemonset.yaml     YAML; every object named; the
                                       DaemonSet's selector matches its pod,
                                       every mount has its volume, the
                                       ConfigMap it mounts exists; vmnapd
                                       starts with the ConfigMap's
                                       vmnapd.conf and the liveness probe's
                                       vmnapctl command succeeds against it
Kubernetes, Kata and Cloud Hypervisor themselves are not run here.
"""
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import tomllib

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import proc  # noqa: E402
import tap  # noqa: E402

ROOT = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", ".."))
EX = os.path.join(ROOT, "examples")
BUILD = os.environ.get("BUILD", "build")

try:
    import yaml
except ImportError:  # scripts/deps.sh installs it
    print("1..0 # SKIP python3-yaml not installed")
    sys.exit(0)


def ok(cond, what, diag=None):
    tap.ok(cond, what, None if cond else diag)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, **kw)


def kata():
    path = os.path.join(EX, "kata", "configuration-qemu-vmnap.toml")
    try:
        with open(path, "rb") as f:
            q = tomllib.load(f)["hypervisor"]["qemu"]
    except (tomllib.TOMLDecodeError, KeyError) as e:
        ok(False, "kata: configuration TOML parses, has [hypervisor.qemu]", str(e))
        return
    ok(True, "kata: configuration TOML parses, has [hypervisor.qemu]")
    ok(q.get("path", "").endswith("/qemu-vmnap") and
           q["path"] in q.get("valid_hypervisor_paths", []),
           "kata: the hypervisor is the qemu-vmnap wrapper, listed as valid")
    ok(q.get("file_mem_backend") == "/dev/shm" and
           "/dev/shm" in q.get("valid_file_mem_backends", []) and
           q.get("shared_fs") == "virtio-fs",
           "kata: guest RAM on /dev/shm (memory-backend-file, shared), listed as valid")
    ok(q.get("enable_hugepages") is False and q.get("enable_mem_prealloc") is False,
           "kata: no huge pages (refused by vmnap), no preallocation")
    wrapper = os.path.join(EX, "kata", "qemu-vmnap")
    r = run(["sh", "-n", wrapper])
    with open(wrapper) as f:
        src = f.read()
    exported = re.search(r"^export (.*)$", src, re.M)
    names = set(exported.group(1).split()) if exported else set()
    ok(r.returncode == 0 and os.access(wrapper, os.X_OK) and
           {"LD_PRELOAD", "VMNAP_SOCKET", "VMNAP_MEM_PATH", "VMNAP_VM"} <= names,
           "kata: qemu-vmnap is executable sh and exports what the shim reads",
           r.stderr or f"exports {sorted(names)}")


def cloud_hypervisor():
    script = os.path.join(EX, "cloud-hypervisor", "run-vm.sh")
    r = run(["bash", "-n", script])
    ok(r.returncode == 0 and os.access(script, os.X_OK),
           "cloud-hypervisor: run-vm.sh is executable bash", r.stderr)
    with open(script) as f:
        src = f.read()
    mem = re.search(r'--memory "([^"]*)"', src)
    ok(bool(mem) and "shared=on" in mem.group(1) and "hugepages" not in mem.group(1),
           "cloud-hypervisor: --memory shared=on, no hugepages",
           mem.group(1) if mem else "no --memory")
    ctl = os.path.join(BUILD, "vmnapctl")
    if not os.access(ctl, os.X_OK):
        ok(False, f"{ctl} built")
        return
    helptext = run([ctl, "--help"]).stdout + run([ctl, "--help"]).stderr
    cmds = re.findall(r"vmnapctl (\w[\w-]*)((?: [^\n]*\\\n)*[^\n]*)", src)
    bad = []
    for cmd, rest in cmds:
        if not re.search(rf"^\s+{re.escape(cmd)}\b", helptext, re.M):
            bad.append(f"no command {cmd}")
        for opt in re.findall(r"(--[a-z][a-z-]*)", rest):
            if opt not in helptext:
                bad.append(f"{cmd}: no option {opt}")
        m = re.search(r"--pause \"(\w+):", rest)
        if m and m.group(1) not in ("qmp", "freezer", "firecracker", "chv"):
            bad.append(f"pause backend {m.group(1)}")
    ok(cmds and not bad, f"cloud-hypervisor: its {len(cmds)} vmnapctl commands and "
           "their options exist", "\n".join(bad))


def kubernetes():
    path = os.path.join(EX, "kubernetes", "vmnapd-daemonset.yaml")
    try:
        with open(path) as f:
            docs = [d for d in yaml.safe_load_all(f) if d is not None]
    except yaml.YAMLError as e:
        ok(False, "kubernetes: manifest YAML parses", str(e))
        return
    ok(all(isinstance(d, dict) and d.get("apiVersion") and d.get("kind") and
               d.get("metadata", {}).get("name") for d in docs),
           f"kubernetes: {len(docs)} objects, each with apiVersion, kind, name")
    by_kind = {d["kind"]: d for d in docs}
    ds, cm, ns = by_kind.get("DaemonSet"), by_kind.get("ConfigMap"), by_kind.get("Namespace")
    if not (ds and cm and ns):
        ok(False, "kubernetes: a Namespace, a ConfigMap and a DaemonSet")
        return
    spec = ds["spec"]["template"]["spec"]
    labels = ds["spec"]["template"]["metadata"]["labels"]
    ok(ds["apiVersion"] == "apps/v1" and
           ds["spec"]["selector"]["matchLabels"].items() <= labels.items(),
           "kubernetes: the DaemonSet's selector matches its pod template")
    ok(ds["metadata"]["namespace"] == cm["metadata"]["namespace"] ==
           ns["metadata"]["name"], "kubernetes: objects in the Namespace it creates")
    vols = {v["name"]: v for v in spec["volumes"]}
    c = spec["containers"][0]
    missing = [m["name"] for m in c["volumeMounts"] if m["name"] not in vols]
    ok(not missing, "kubernetes: every volumeMount has its volume", str(missing))
    ok(vols.get("config", {}).get("configMap", {}).get("name") == cm["metadata"]["name"],
           "kubernetes: the config volume is the ConfigMap")
    mounts = {m["mountPath"] for m in c["volumeMounts"]}
    ok(spec.get("hostPID") is True and {"/run/vmnap", "/var/lib/vmnap", "/sys/fs/cgroup",
                                             "/etc/vmnap"} <= mounts,
           "kubernetes: host PIDs, run dir, store, cgroupfs and config mounted")
    try:
        conf = json.loads(cm["data"]["vmnapd.conf"])
    except (KeyError, ValueError) as e:
        ok(False, "kubernetes: vmnapd.conf in the ConfigMap is JSON", str(e))
        return
    ok(c["args"] == ["--config", "/etc/vmnap/vmnapd.conf"] and
           conf.get("run_dir") == "/run/vmnap",
           "kubernetes: vmnapd reads the mounted vmnapd.conf; its run dir is the mounted one")
    probe = c["livenessProbe"]["exec"]["command"]
    vmnapd_runs(conf, probe)


def vmnapd_runs(conf, probe):
    """vmnapd with the ConfigMap's settings (its paths moved to a temporary
    directory: command-line options win) answers the liveness probe."""
    vmnapd, ctl = os.path.join(BUILD, "vmnapd"), os.path.join(BUILD, "vmnapctl")
    if not (os.access(vmnapd, os.X_OK) and os.access(ctl, os.X_OK)):
        ok(False, f"{vmnapd} and {ctl} built")
        return
    with tempfile.TemporaryDirectory(prefix="vmnap-examples.") as t:
        cf, run_dir = os.path.join(t, "vmnapd.conf"), os.path.join(t, "run")
        with open(cf, "w") as f:
            json.dump(conf, f)
        with open(os.path.join(t, "log"), "w") as log:
            p = subprocess.Popen([vmnapd, "-c", cf, "-r", run_dir, "-s", os.path.join(t, "s"),
                                  "-e", os.path.join(t, "events.jsonl")],
                                 stdout=log, stderr=subprocess.STDOUT)
        sock = os.path.join(run_dir, "api.sock")
        for _ in range(200):
            if os.path.exists(sock) or p.poll() is not None:
                break
            time.sleep(0.05)
        cmd = [ctl if probe[0].endswith("/vmnapctl") else probe[0]] + \
            [sock if a == "/run/vmnap/api.sock" else a for a in probe[1:]]
        r = run(cmd)
        alive = p.poll() is None
        rc = proc.stop(p)
        with open(os.path.join(t, "log")) as f:
            log = f.read()
        ok(alive and r.returncode == 0,
               "kubernetes: vmnapd runs with the ConfigMap's vmnapd.conf and the liveness "
               f"probe ({shlex.join(probe)}) succeeds",
               None if alive and r.returncode == 0 else log[-2000:] + r.stdout + r.stderr)
        ok(rc == 0, f"kubernetes: vmnapd stops cleanly on SIGTERM (exit {rc})")


def main():
    kata()
    cloud_hypervisor()
    kubernetes()
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
