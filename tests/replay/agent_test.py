#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""agent_test.py - the exec agent's wire protocol, on the host.

Runs build/tests/replay/exec_agent --tty on a pseudo-terminal (the same code
path as the guest's control line) and checks, in TAP: commands, exit codes,
digests, the early ack, timeouts, output caps, and hostile frames (bad magic,
oversize length, invalid JSON, unknown fields, bad argv) each refused with
the stream staying usable.
"""
import hashlib
import json
import os
import pty
import struct
import subprocess
import sys
import tty

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from replay import agent as agent_client  # noqa: E402

AGENT = os.path.join(ROOT, os.environ.get("BUILD", "build"), "tests/replay/exec_agent")
RECV_TIMEOUT_S = 30


class PtyStream:
    """sendall/recv over a pty master, as agent_request expects of a socket."""

    def __init__(self, fd):
        self.fd = fd

    def sendall(self, data):
        while data:
            n = os.write(self.fd, data)
            data = data[n:]

    def recv(self, n):
        import select
        r, _, _ = select.select([self.fd], [], [], RECV_TIMEOUT_S)
        if not r:
            raise TimeoutError("agent did not answer")
        return os.read(self.fd, n)


def raw_frame(body, magic=b"VXRQ", length=None):
    return magic + struct.pack(">I", len(body) if length is None else length) + body


def read_reply(st):
    """(ack_seen, header) of one reply that may be an error."""
    magic = agent_client._recv_exact(st, 4)
    ack = magic == b"VXAK"
    if ack:
        magic = agent_client._recv_exact(st, 4)
    assert magic == b"VXRS", magic
    (n,) = struct.unpack(">I", agent_client._recv_exact(st, 4))
    hdr = json.loads(agent_client._recv_exact(st, n))
    if hdr.get("ok"):
        hdr["stdout"] = agent_client._recv_exact(st, hdr["stdout_len"])
        hdr["stderr"] = agent_client._recv_exact(st, hdr["stderr_len"])
    return ack, hdr


def main():
    if not os.access(AGENT, os.X_OK):
        print(f"agent_test: {AGENT} not built (make userspace)")
        return 77
    master, slave = pty.openpty()
    tty.setraw(master)
    tty.setraw(slave)  # raw before the agent runs: no echo of early bytes
    agent = subprocess.Popen([AGENT, "--tty", os.ttyname(slave)], stdin=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    # Keep our slave fd open: a master whose slave nobody holds (the agent
    # may not have opened it yet) reads EIO.
    st = PtyStream(master)
    results = []

    def t(name, fn):
        try:
            fn()
            results.append((True, name, ""))
        except Exception as e:  # noqa: BLE001 - a failed check
            results.append((False, name, repr(e)))

    def ping():
        res, ack = agent_client.agent_request(st, ["/bin/true"], cwd="/")
        assert res["exit_code"] == 0 and ack is not None

    def digest():
        res, _ = agent_client.agent_request(st, ["/bin/echo", "hello"], cwd="/")
        assert res["stdout"] == b"hello\n"
        assert res["stdout_sha256"] == hashlib.sha256(b"hello\n").hexdigest()
        assert res["stderr_sha256"] == hashlib.sha256(b"").hexdigest()

    def exit_code():
        res, _ = agent_client.agent_request(st, ["/bin/sh", "-c", "echo e >&2; exit 3"], cwd="/")
        assert res["exit_code"] == 3 and res["stderr"] == b"e\n"

    def cwd():
        res, _ = agent_client.agent_request(st, ["/bin/pwd"], cwd="/tmp")
        assert res["stdout"] == b"/tmp\n"

    def timeout():
        res, _ = agent_client.agent_request(st, ["/bin/sleep", "30"], cwd="/", timeout_ms=200)
        assert res["timed_out"] and res["signal"] == 9 and res["exit_code"] == -1

    def big_output():
        res, _ = agent_client.agent_request(st, ["/bin/sh", "-c", "head -c 3000000 /dev/zero"], cwd="/")
        assert res["stdout_total"] == 3000000 and res["stdout_len"] == 1024 * 1024
        assert res["stdout_sha256"] == hashlib.sha256(bytes(3000000)).hexdigest()

    def missing_program():
        res, _ = agent_client.agent_request(st, ["/nonexistent/prog"], cwd="/")
        assert res["exit_code"] == 127

    def missing_cwd():
        res, _ = agent_client.agent_request(st, ["/bin/true"], cwd="/nonexistent")
        assert res["exit_code"] == 126

    def refused(frame, why):
        def fn():
            st.sendall(frame)
            ack, hdr = read_reply(st)
            assert not ack and hdr["ok"] is False and why in hdr["error"], hdr
            ping()  # still in step
        return fn

    t("ping with early ack", ping)
    t("stdout and digests", digest)
    t("exit code and stderr", exit_code)
    t("working directory", cwd)
    t("timeout kills the command", timeout)
    t("output capped, digest over all", big_output)
    t("missing program exits 127", missing_program)
    t("missing cwd exits 126", missing_cwd)
    t("bad magic refused, resync", refused(raw_frame(b"{}", magic=b"XXXX"), "magic"))
    t("oversize length refused", refused(raw_frame(b"", length=1 << 30), "length"))
    t("invalid JSON refused", refused(raw_frame(b"{not json"), "JSON"))
    t("non-object refused", refused(raw_frame(b"[1,2]"), "object"))
    t("unknown field refused", refused(raw_frame(b'{"argv":["/bin/true"],"x":1}'), "unknown"))
    t("relative argv[0] refused", refused(raw_frame(b'{"argv":["true"]}'), "absolute"))
    t("empty argv refused", refused(raw_frame(b'{"argv":[]}'), "argv"))
    t("too many args refused",
      refused(raw_frame(json.dumps({"argv": ["/bin/true"] * 65}).encode()), "argv"))
    t("NUL in argv refused", refused(raw_frame(b'{"argv":["/bin/tr\\u0000ue"]}'), ""))
    t("bad timeout refused",
      refused(raw_frame(b'{"argv":["/bin/true"],"timeout_ms":-5}'), "timeout"))
    t("duplicate keys refused",
      refused(raw_frame(b'{"argv":["/bin/true"],"argv":["/bin/false"]}'), "JSON"))
    agent.kill()
    agent.wait()
    os.close(slave)
    print(f"1..{len(results)}")
    for i, (ok, name, err) in enumerate(results, 1):
        print(f"{'ok' if ok else 'not ok'} {i} - {name}{' : ' + err if err else ''}")
    return 0 if all(r[0] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
