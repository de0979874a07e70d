#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""bench-gateway.py - vmnap-gateway's proxy overhead, side by side with nginx
as a reverse proxy, on this machine, to the same upstream (run it with
scripts/bench-gateway.sh, `make bench-gateway`).

Three paths to one fake model server (vmnap-gateway --fake-upstream), unix
sockets only:

  direct   client -> the fake model server
  gateway  client -> vmnap-gateway (one listener, its VM registered in a
           vmnapd of its own, unmanaged: each request is a wait started
           and made ready, never a pause) -> the fake model server
  nginx    client -> nginx (proxy_pass to an upstream block with keepalive,
           proxy_buffering off, HTTP/1.1) -> the fake model server

Phases, each run on every path in turn, ROUNDS times with the order
rotated (medians over rounds are reported):

  serial   N requests one after another (chat completion, no wait):
           latency to the first response byte and to the end, p50 / p99
  conc     C concurrent clients, M requests in all: req/s, latency p50/p99
  sse      S streamed completions of SIZE bytes in 1000-byte SSE events,
           sent back to back by the upstream: latency to the first event
           and to the last ([DONE]) through the proxy

Every request opens its own connection (Connection: close), as the
client is the same on all paths.  The client is Python asyncio on the
same cores as the proxies: absolute figures include it; the ratios to
direct and between the proxies are the figures to compare.
Writes OUT/summary.json.
"""
import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from replay.common import percentile  # noqa: E402 - scripts/ is on sys.path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("BUILD", "build")
VM = "bench"
PHASE_TIMEOUT_S = 300


def log(msg):
    print("bench-gateway: " + msg, file=sys.stderr, flush=True)


def request_bytes(stream, size=None):
    body = json.dumps({"model": "bench", "stream": stream,
                       "messages": [{"role": "user", "content": "next?"}]}).encode()
    extra = f"X-Fake-Size: {size}\r\n" if size is not None else ""
    return (f"POST /v1/chat/completions HTTP/1.1\r\nHost: model\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            f"X-Fake-Step: 1\r\nX-Fake-Wait-Ms: 0\r\n{extra}Connection: close\r\n\r\n"
            ).encode() + body


async def one(path, req, events=False):
    """(first byte s, end s, status, bytes, per-event s or None)."""
    t0 = time.perf_counter()
    r, w = await asyncio.open_unix_connection(path)
    try:
        w.write(req)
        await w.drain()
        buf, t1, seen = [], None, b""
        while True:
            d = await r.read(65536)
            if not d:
                break
            buf.append(d)
            if t1 is None:
                # the first byte of the answer; of a stream, its first
                # event (headers may come before it)
                seen += d
                if not events or b"data: " in seen.partition(b"\r\n\r\n")[2]:
                    t1 = time.perf_counter()
        t2 = time.perf_counter()
        if not buf:
            raise ConnectionError("closed without an answer")
        if t1 is None:
            t1 = t2
    finally:
        w.close()
    raw = b"".join(buf)
    status = int(raw.split(b" ", 2)[1])
    per_event = None
    if events:
        n = raw.count(b"data: ")
        if b"data: [DONE]" not in raw:
            raise ConnectionError("stream without [DONE]")
        per_event = (t2 - t1) / max(1, n - 1)
    return t1 - t0, t2 - t0, status, len(raw), per_event


async def serial(path, n):
    req = request_bytes(False)
    first, total, bad = [], [], 0
    t0 = time.perf_counter()
    for _ in range(n):
        f, t, st, _, _ = await one(path, req)
        bad += st != 200
        first.append(f * 1e3)
        total.append(t * 1e3)
    dur = time.perf_counter() - t0
    return {"requests": n, "errors": bad, "req_per_s": round(n / dur, 1),
            "first_byte_p50_ms": round(percentile(first, 50), 4),
            "first_byte_p99_ms": round(percentile(first, 99), 4),
            "total_p50_ms": round(percentile(total, 50), 4),
            "total_p99_ms": round(percentile(total, 99), 4)}


async def concurrent(paths, conc, m):
    req = request_bytes(False)
    lat, errs = [], [0]
    left = [m]

    async def worker(path):
        while left[0] > 0:
            left[0] -= 1
            try:
                _, t, st, _, _ = await one(path, req)
                errs[0] += st != 200
                lat.append(t * 1e3)
            except (OSError, ConnectionError, ValueError, IndexError):
                errs[0] += 1
    t0 = time.perf_counter()
    await asyncio.gather(*(worker(paths[i % len(paths)]) for i in range(conc)))
    dur = time.perf_counter() - t0
    return {"streams": conc, "requests": m, "errors": errs[0],
            "req_per_s": round(len(lat) / dur, 1),
            "latency_p50_ms": round(percentile(lat, 50), 3),
            "latency_p99_ms": round(percentile(lat, 99), 3)}


async def sse(path, n, size):
    req = request_bytes(True, size)
    first, whole, per_ev, mib_s, bad = [], [], [], [], 0
    for _ in range(n):
        f, t, st, nbytes, pe = await one(path, req, events=True)
        bad += st != 200
        first.append(f * 1e3)
        whole.append(t * 1e3)
        per_ev.append(pe * 1e6)
        mib_s.append(nbytes / (1 << 20) / t)
    return {"streams": n, "events_per_stream": -(-size // 1000) + 1, "errors": bad,
            "first_event_p50_ms": round(percentile(first, 50), 4),
            "first_event_p99_ms": round(percentile(first, 99), 4),
            "stream_p50_ms": round(percentile(whole, 50), 4),
            "stream_p99_ms": round(percentile(whole, 99), 4),
            # after the first event; a proxy that held the first event has
            # the rest buffered by then: not a per-chunk latency
            "per_event_p50_us": round(percentile(per_ev, 50), 2),
            "per_event_p99_us": round(percentile(per_ev, 99), 2),
            "stream_mib_s_p50": round(percentile(mib_s, 50), 2)}


def unix_http(path, method, target, body=None):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(path)
    data = b"" if body is None else json.dumps(body).encode()
    s.sendall((f"{method} {target} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(data)}\r\n"
               "Content-Type: application/json\r\nConnection: close\r\n\r\n").encode() + data)
    out = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        out += d
    s.close()
    head, _, rest = out.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), rest.decode(errors="replace")


def wait_paths(paths, procs, timeout=20):
    deadline = time.monotonic() + timeout
    while not all(os.path.exists(p) for p in paths):
        for name, p in procs.items():
            if p.poll() is not None:
                raise RuntimeError(f"{name} exited {p.returncode} before listening")
        if time.monotonic() > deadline:
            raise RuntimeError(f"not listening after {timeout} s: {paths}")
        time.sleep(0.05)


NGINX_CONF = """\
daemon off;
master_process on;
worker_processes {workers};
user root;
pid {w}/nginx.pid;
error_log {w}/nginx-error.log warn;
events {{ worker_connections 1024; }}
http {{
	access_log off;
	client_body_temp_path {w}/nginx-tmp/body;
	proxy_temp_path {w}/nginx-tmp/proxy;
	fastcgi_temp_path {w}/nginx-tmp/fastcgi;
	uwsgi_temp_path {w}/nginx-tmp/uwsgi;
	scgi_temp_path {w}/nginx-tmp/scgi;
	upstream model {{ server unix:{w}/model.sock; keepalive 64; }}
	server {{
		listen unix:{w}/nginx.sock;
		location / {{
			proxy_pass http://model;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_buffering off;
			proxy_request_buffering off;
		}}
	}}
}}
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--serial", type=int, default=500, help="N serial requests per path")
    ap.add_argument("--conc", type=int, default=64, help="C concurrent streams")
    ap.add_argument("--conc-requests", type=int, default=2048, help="M requests per path")
    ap.add_argument("--conc-vms", type=int, default=8,
                    help="gateway listeners (VMs) the concurrent streams are spread over: "
                         "vmnapd takes at most 32 waits per VM not yet ready; beyond, the "
                         "gateway forwards unmanaged (counted in unmanaged_total)")
    ap.add_argument("--sse", type=int, default=100, help="S SSE streams per path")
    ap.add_argument("--sse-size", type=int, default=64000, help="bytes per SSE stream")
    ap.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    a = ap.parse_args()
    if min(a.rounds, a.serial, a.conc, a.conc_requests, a.conc_vms, a.sse, a.sse_size) < 1:
        ap.error("every count must be positive")
    gw_exe = os.path.join(ROOT, BUILD, "vmnap-gateway")
    vmnapd_exe = os.path.join(ROOT, BUILD, "vmnapd")
    traj = os.path.join(ROOT, "tests/data/replay-tiny.jsonl")
    os.makedirs(a.out, exist_ok=True)
    w = tempfile.mkdtemp(prefix="vmnap-bench-gw.")
    procs = {}
    logf = open(os.path.join(a.out, "servers.log"), "w")

    def start(name, cmd):
        procs[name] = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        start("fake", [gw_exe, "--fake-upstream", traj, "--listen", f"model=unix:{w}/model.sock"])
        start("vmnapd", [vmnapd_exe, "-r", f"{w}/run", "-s", f"{w}/store", "-e", f"{w}/events.jsonl",
                         "-l", "warn"])
        wait_paths([f"{w}/model.sock", f"{w}/run/api.sock"], procs)
        vms = [f"{VM}{i}" for i in range(a.conc_vms)]
        for vm in vms:
            st, txt = unix_http(f"{w}/run/api.sock", "PUT", f"/vms/{vm}", {"managed": False})
            if st >= 300:
                raise RuntimeError(f"vmnapd refused the VM: {st} {txt}")
        cmd = [gw_exe, "--api", f"{w}/run/api.sock", "--upstream", "http://model",
               "--upstream-unix", f"{w}/model.sock", "--admin", f"unix:{w}/admin.sock", "-l", "warn"]
        for vm in vms:
            cmd += ["--listen", f"{vm}=unix:{w}/gw-{vm}.sock"]
        start("gateway", cmd)
        os.makedirs(f"{w}/nginx-tmp", exist_ok=True)
        workers = os.cpu_count() or 1
        with open(f"{w}/nginx.conf", "w") as f:
            f.write(NGINX_CONF.format(w=w, workers=workers))
        start("nginx", [a.nginx, "-p", w, "-c", f"{w}/nginx.conf", "-e", f"{w}/nginx-error.log"])
        gw_socks = [f"{w}/gw-{vm}.sock" for vm in vms]
        wait_paths(gw_socks + [f"{w}/admin.sock", f"{w}/nginx.sock"], procs)
        paths = {"direct": f"{w}/model.sock", "gateway": gw_socks[0], "nginx": f"{w}/nginx.sock"}
        conc_paths = {"direct": [paths["direct"]], "gateway": gw_socks, "nginx": [paths["nginx"]]}
        names = list(paths)

        async def bench():
            res = {p: {"serial": [], "conc": [], "sse": []} for p in names}
            for p in names:  # warm every path up
                await asyncio.wait_for(serial(paths[p], 20), PHASE_TIMEOUT_S)
            for rnd in range(a.rounds):
                order = names[rnd % 3:] + names[:rnd % 3]
                log(f"round {rnd + 1}/{a.rounds}: {', '.join(order)}")
                for p in order:
                    res[p]["serial"].append(await asyncio.wait_for(
                        serial(paths[p], a.serial), PHASE_TIMEOUT_S))
                    res[p]["conc"].append(await asyncio.wait_for(
                        concurrent(conc_paths[p], a.conc, a.conc_requests), PHASE_TIMEOUT_S))
                    res[p]["sse"].append(await asyncio.wait_for(
                        sse(paths[p], a.sse, a.sse_size), PHASE_TIMEOUT_S))
            return res
        raw = asyncio.run(bench())
        st, metrics = unix_http(f"{w}/admin.sock", "GET", "/metrics")
        gw_counters = {}
        for ln in metrics.splitlines():
            if ln.startswith("vmnap_gateway_") and " " in ln:
                k, v = ln.rsplit(" ", 1)
                k = k.split("{", 1)[0][len("vmnap_gateway_"):]
                gw_counters[k] = gw_counters.get(k, 0) + float(v)
    finally:
        for name in ("nginx", "gateway", "vmnapd", "fake"):
            p = procs.get(name)
            if p and p.poll() is None:
                p.send_signal(signal.SIGQUIT if name == "nginx" else signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        for f in ("nginx-error.log",):
            if os.path.exists(os.path.join(w, f)):
                shutil.copy(os.path.join(w, f), a.out)
        shutil.rmtree(w, ignore_errors=True)
        logf.close()

    med = {}
    for p in names:
        med[p] = {}
        for phase, rows in raw[p].items():
            med[p][phase] = {k: (round(statistics.median(r[k] for r in rows), 4)
                                 if isinstance(rows[0][k], float) else rows[0][k])
                             for k in rows[0]}
            med[p][phase]["errors"] = sum(r["errors"] for r in rows)

    def ratio(p, q, phase, key):
        x, y = med[p][phase][key], med[q][phase][key]
        return round(x / y, 3) if x is not None and y else None

    def added(p, phase, key):
        return round(med[p][phase][key] - med["direct"][phase][key], 4)
    compare = {}
    for p in ("gateway", "nginx"):
        compare[p] = {
            "added_first_byte_p50_ms": added(p, "serial", "first_byte_p50_ms"),
            "added_first_byte_p99_ms": added(p, "serial", "first_byte_p99_ms"),
            "added_conc_latency_p50_ms": added(p, "conc", "latency_p50_ms"),
            "added_conc_latency_p99_ms": added(p, "conc", "latency_p99_ms"),
            "added_sse_first_event_p50_ms": added(p, "sse", "first_event_p50_ms"),
            "serial_req_per_s_vs_direct": ratio(p, "direct", "serial", "req_per_s"),
            "conc_req_per_s_vs_direct": ratio(p, "direct", "conc", "req_per_s"),
            "sse_stream_p50_vs_direct": ratio(p, "direct", "sse", "stream_p50_ms"),
        }
    compare["gateway_vs_nginx"] = {
        "serial_first_byte_p50": ratio("gateway", "nginx", "serial", "first_byte_p50_ms"),
        "serial_first_byte_p99": ratio("gateway", "nginx", "serial", "first_byte_p99_ms"),
        "conc_req_per_s": ratio("gateway", "nginx", "conc", "req_per_s"),
        "conc_latency_p99": ratio("gateway", "nginx", "conc", "latency_p99_ms"),
        "sse_first_event_p50": ratio("gateway", "nginx", "sse", "first_event_p50_ms"),
        "sse_stream_p50": ratio("gateway", "nginx", "sse", "stream_p50_ms"),
    }
    total_gw = a.rounds * (a.serial + a.conc_requests + a.sse) + 20
    errors = sum(med[p][ph]["errors"] for p in names for ph in med[p])
    nginx_v = subprocess.run([a.nginx, "-v"], capture_output=True, text=True).stderr.strip()
    summary = {
        "what": "vmnap-gateway vs nginx reverse proxy vs direct, same fake upstream, unix sockets",
        "host": {"cpus": os.cpu_count(), "kernel": os.uname().release,
                 "loadavg_at_end": os.getloadavg()},
        "nginx": {"version": nginx_v, "worker_processes": workers,
                  "config": "proxy_pass to an upstream with keepalive 64, HTTP/1.1, "
                            "proxy_buffering off, proxy_request_buffering off"},
        "gateway": {"vm": "registered in vmnapd, unmanaged (a wait per request, never a pause)",
                    "listeners": len(vms),
                    "conc_spread": f"the {a.conc} streams over {len(vms)} listeners (VMs); "
                                   "serial and SSE on one",
                    "counters": gw_counters},
        "params": {"rounds": a.rounds, "serial": a.serial, "conc": a.conc,
                   "conc_requests": a.conc_requests, "conc_vms": a.conc_vms,
                   "sse": a.sse, "sse_size": a.sse_size,
                   "client": "python asyncio, one connection per request"},
        "medians": med, "compare": compare, "rounds_raw": raw,
        "errors": errors,
        "gateway_waits_ok": gw_counters.get("waits_started_total") == total_gw
        and not gw_counters.get("unmanaged_total"),
    }
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, sort_keys=True)
    print(table(summary))
    log(f"summary in {os.path.join(a.out, 'summary.json')}")
    if not summary["gateway_waits_ok"]:
        log(f"warning: {gw_counters.get('unmanaged_total')} request(s) forwarded unmanaged "
            f"(vmnapd refused their wait), waits started {gw_counters.get('waits_started_total')} "
            f"of {total_gw}")
    return 0 if errors == 0 else 1


def table(s):
    m, c = s["medians"], s["compare"]
    rows = [("serial: first byte p50 / p99 ms", "serial", "first_byte_p50_ms", "first_byte_p99_ms"),
            ("serial: req/s", "serial", "req_per_s", None),
            (f"{s['params']['conc']} streams: req/s", "conc", "req_per_s", None),
            (f"{s['params']['conc']} streams: latency p50 / p99 ms", "conc", "latency_p50_ms",
             "latency_p99_ms"),
            ("SSE: first event p50 / p99 ms", "sse", "first_event_p50_ms", "first_event_p99_ms"),
            (f"SSE: whole stream ({-(-s['params']['sse_size'] // 1000) + 1} events) p50 / p99 ms",
             "sse", "stream_p50_ms", "stream_p99_ms")]
    out = ["| | direct | vmnap-gateway | nginx | gateway / nginx |", "|---|---|---|---|---|"]
    for title, ph, k1, k2 in rows:
        cells = []
        for p in ("direct", "gateway", "nginx"):
            v = m[p][ph]
            cells.append(f"{v[k1]:.2f}" + (f" / {v[k2]:.2f}" if k2 else ""))
        g, n = m["gateway"][ph][k1], m["nginx"][ph][k1]
        out.append(f"| {title} | " + " | ".join(cells) + f" | {g / n:.2f}× |")
    out.append("")
    out.append(f"gateway added first byte p50 / p99: {c['gateway']['added_first_byte_p50_ms']:.3f} / "
               f"{c['gateway']['added_first_byte_p99_ms']:.3f} ms; nginx "
               f"{c['nginx']['added_first_byte_p50_ms']:.3f} / "
               f"{c['nginx']['added_first_byte_p99_ms']:.3f} ms; errors {s['errors']}; "
               f"gateway waits as expected: {s['gateway_waits_ok']}")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
