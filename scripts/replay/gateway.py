# SPDX-License-Identifier: GPL-2.0-only
"""--via gateway: the replayer is the agent and sends each step's model
request to its VM's vmnap-gateway listener, in front of the gateway's fake
model server (--fake-upstream), which answers after the step's wait_ms.
vmnapd hears of the wait from the gateway alone.

Also the gateway's own overhead: a calibration of interleaved requests
straight to the fake upstream and through the gateway with an unmanaged VM,
side by side in the same run.
"""
import json
import os
import socket
import subprocess
import time

from .common import log, now_ns, percentile

MODEL_TIMEOUT_S = 600
CALIB_VM = "gwcalib"


class ModelError(RuntimeError):
    pass


def model_request(sock_path, step, wait_ms, timeout_s=MODEL_TIMEOUT_S):
    """One streamed chat completion over a unix socket, as an agent sends it.
    Returns (t_send_ns, t_first_byte_ns, t_end_ns, status, content): the
    first byte is the first SSE event's (the model's first token; a proxy
    may send the headers before it, the fake model server does); content
    is the SSE deltas put together."""
    body = json.dumps({"model": "vmnap-replay", "stream": True,
                       "messages": [{"role": "user", "content": f"step {step}"}]}).encode()
    req = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: model\r\n"
           f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
           f"X-Fake-Step: {step}\r\nX-Fake-Wait-Ms: {int(wait_ms)}\r\n"
           f"Connection: close\r\n\r\n").encode() + body
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout_s)
    try:
        s.connect(sock_path)
        t_send = now_ns()
        s.sendall(req)
        chunks, t_first, seen = [], None, b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            chunks.append(d)
            if t_first is None:
                seen += d
                if b"data:" in seen.partition(b"\r\n\r\n")[2]:
                    t_first = now_ns()
        t_end = now_ns()
    except OSError as e:
        raise ModelError(f"{sock_path}: {e}") from e
    finally:
        s.close()
    raw = b"".join(chunks)
    if not raw:
        raise ModelError(f"{sock_path}: connection closed without an answer")
    if t_first is None:
        t_first = t_end
    head, _, rest = raw.partition(b"\r\n\r\n")
    try:
        status = int(head.split(b" ", 2)[1])
    except (IndexError, ValueError):
        raise ModelError(f"{sock_path}: not an HTTP answer: {head[:80]!r}") from None
    if b"transfer-encoding: chunked" in head.lower():
        rest = dechunk(rest, sock_path)
    content = []
    for ln in rest.split(b"\n"):
        ln = ln.strip()
        if not ln.startswith(b"data: ") or ln == b"data: [DONE]":
            continue
        try:
            content.append(json.loads(ln[6:])["choices"][0]["delta"]["content"])
        except (ValueError, KeyError, IndexError, TypeError):
            raise ModelError(f"{sock_path}: bad SSE event {ln[:80]!r}") from None
    if b"data: [DONE]" not in rest:
        raise ModelError(f"{sock_path}: the stream has no [DONE]")
    return t_send, t_first, t_end, status, "".join(content)


def dechunk(body, what):
    out, pos = [], 0
    while True:
        eol = body.find(b"\r\n", pos)
        try:
            n = int(body[pos:eol].split(b";", 1)[0], 16)
        except ValueError:
            raise ModelError(f"{what}: bad chunk size {body[pos:pos + 20]!r}") from None
        if eol < 0 or n < 0:
            raise ModelError(f"{what}: truncated chunked body")
        if n == 0:
            return b"".join(out)
        out.append(body[eol + 2:eol + 2 + n])
        pos = eol + 2 + n + 2


def unix_get(sock_path, path, timeout_s=5):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout_s)
    try:
        s.connect(sock_path)
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        out = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            out += d
    finally:
        s.close()
    return out.partition(b"\r\n\r\n")[2].decode(errors="replace")


def parse_metrics(text):
    """{metric name: total over its label sets} of Prometheus text."""
    out = {}
    for ln in text.splitlines():
        if not ln or ln.startswith("#"):
            continue
        name, _, val = ln.rpartition(" ")
        name = name.split("{", 1)[0]
        try:
            out[name] = out.get(name, 0) + float(val)
        except ValueError:
            continue
    return out


class Gateway:
    """The fake model server and vmnap-gateway with one unix listener per VM,
    both from the binary pinned for this run."""

    def __init__(self, exe, trajectory, sockdir, log_dir, api_sock, vms):
        os.makedirs(sockdir, exist_ok=True)
        self.model_sock = os.path.join(sockdir, "model.sock")
        self.admin_sock = os.path.join(sockdir, "gw-admin.sock")
        self.socks = {vm: os.path.join(sockdir, f"gw-{i}.sock") for i, vm in enumerate(vms)}
        self.log = open(os.path.join(log_dir, "gateway.log"), "w")
        self.fake = subprocess.Popen([exe, "--fake-upstream", trajectory,
                                      "--listen", "model=unix:" + self.model_sock],
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        cmd = [exe, "--api", api_sock, "--upstream", "http://model",
               "--upstream-unix", self.model_sock, "--admin", "unix:" + self.admin_sock,
               "-l", "warn"]
        for vm, p in self.socks.items():
            cmd += ["--listen", f"{vm}=unix:{p}"]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 20
        want = [self.model_sock, self.admin_sock] + list(self.socks.values())
        while not all(os.path.exists(p) for p in want):
            for p in (self.fake, self.proc):
                if p.poll() is not None:
                    self.stop()
                    raise RuntimeError(f"vmnap-gateway exited {p.returncode} (see {self.log.name})")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"vmnap-gateway did not listen (see {self.log.name})")
            time.sleep(0.05)

    def metrics(self):
        try:
            return parse_metrics(unix_get(self.admin_sock, "/metrics"))
        except OSError as e:
            return {"error": str(e)}

    def stop(self):
        rcs = []
        for p in (self.proc, self.fake):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            rcs.append(p.returncode)
        self.log.close()
        return rcs


def calibrate(exe, vmnapd_exe, trajectory, workdir, n):
    """n interleaved pairs of wait-0 requests, straight to the fake upstream
    and through the gateway for an unmanaged VM (a vmnapd of its own), side
    by side: the gateway's added latency at the agent's first byte and at
    the end of the response."""
    from .vmnapd import Vmnapd  # noqa: PLC0415 - avoids a cycle at import
    run_dir = os.path.join(workdir, "run")
    vmnapd = Vmnapd(vmnapd_exe, run_dir, os.path.join(workdir, "store"), workdir,
                    [f"{CALIB_VM}:{os.path.join(workdir, 'vu.sock')}:3"])
    gw = None
    try:
        vmnapd.wait_for([os.path.join(run_dir, "api.sock")])
        vmnapd.api.register_unmanaged(CALIB_VM)
        gw = Gateway(exe, trajectory, workdir, workdir, os.path.join(run_dir, "api.sock"),
                     [CALIB_VM])
        lat = {"direct": {"first": [], "total": []}, "gateway": {"first": [], "total": []}}
        paths = {"direct": gw.model_sock, "gateway": gw.socks[CALIB_VM]}
        for i in range(n + 5):
            order = ("direct", "gateway") if i % 2 else ("gateway", "direct")
            for k in order:
                t0, t1, t2, status, _ = model_request(paths[k], 1, 0, timeout_s=30)
                if status != 200:
                    raise ModelError(f"calibration {k}: HTTP {status}")
                if i >= 5:  # the first few warm both paths up
                    lat[k]["first"].append((t1 - t0) / 1e6)
                    lat[k]["total"].append((t2 - t0) / 1e6)
        m = gw.metrics()
    finally:
        if gw:
            gw.stop()
        vmnapd.stop()
    out = {"requests_each": n, "vm": "unmanaged (registered, coordinator off)"}
    for what, key in (("first", "first_byte"), ("total", "total")):
        for p in (50, 99):
            d, g = percentile(lat["direct"][what], p), percentile(lat["gateway"][what], p)
            out[f"direct_{key}_p{p}_ms"] = round(d, 3)
            out[f"gateway_{key}_p{p}_ms"] = round(g, 3)
            out[f"added_{key}_p{p}_ms"] = round(g - d, 3)
    out["gateway_waits_started"] = m.get("vmnap_gateway_waits_started_total")
    out["gateway_unmanaged"] = m.get("vmnap_gateway_unmanaged_total")
    log(f"gateway calibration: first byte p50 {out['direct_first_byte_p50_ms']} ms direct, "
        f"{out['gateway_first_byte_p50_ms']} ms via the gateway "
        f"({out['added_first_byte_p50_ms']:+.3f} ms; p99 {out['added_first_byte_p99_ms']:+.3f} ms)")
    return out

