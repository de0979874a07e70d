# SPDX-License-Identifier: GPL-2.0-only
"""Client of the in-guest exec agent (wire format: tests/replay/exec_agent.c)
over a VM's vsock unix socket or the launcher's control line.
"""
import json
import socket
import struct

from .common import (ACK_MAGIC, AGENT_PORT, MIB, REQ_MAGIC, RSP_HEADER_MAX, RSP_MAGIC,
                     STEP_TIMEOUT_MS, WORKSPACE, now_ns)


class AgentError(Exception):
    pass


def _recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise AgentError("agent closed the stream")
        buf += chunk
    return bytes(buf)


def agent_request(sock, argv, cwd=WORKSPACE, timeout_ms=STEP_TIMEOUT_MS, on_ack=None):
    """Send one request on a connected stream; return (result, t_ack_ns).

    result: the agent's JSON header plus "stdout"/"stderr" bytes.  on_ack()
    is called as soon as the agent acknowledged the request (the guest has
    the data), before the command has run."""
    body = json.dumps({"argv": argv, "cwd": cwd, "timeout_ms": timeout_ms}).encode()
    sock.sendall(REQ_MAGIC + struct.pack(">I", len(body)) + body)
    magic = _recv_exact(sock, 4)
    t_ack = None
    if magic == ACK_MAGIC:
        t_ack = now_ns()
        if on_ack:
            on_ack()
        magic = _recv_exact(sock, 4)
    if magic != RSP_MAGIC:
        raise AgentError(f"bad response magic {magic!r}")
    (hlen,) = struct.unpack(">I", _recv_exact(sock, 4))
    if hlen == 0 or hlen > RSP_HEADER_MAX:
        raise AgentError(f"response header length {hlen} out of range")
    hdr = json.loads(_recv_exact(sock, hlen))
    if not isinstance(hdr, dict):
        raise AgentError("response header is not an object")
    if not hdr.get("ok"):
        raise AgentError(f"agent refused: {hdr.get('error')}")
    for k in ("stdout_len", "stderr_len", "exit_code", "stdout_sha256"):
        if k not in hdr:
            raise AgentError(f"response lacks {k}")
    for k in ("stdout_len", "stderr_len"):
        if not isinstance(hdr[k], int) or not 0 <= hdr[k] <= 16 * MIB:
            raise AgentError(f"response {k} out of range")
    hdr["stdout"] = _recv_exact(sock, hdr["stdout_len"])
    hdr["stderr"] = _recv_exact(sock, hdr["stderr_len"])
    return hdr, t_ack


class VsockChannel:
    """A VM's vsock unix socket: one host-initiated connection per command."""

    def __init__(self, uds, port=AGENT_PORT):
        self.uds, self.port = uds, port

    def exec(self, argv, timeout_ms=STEP_TIMEOUT_MS, on_ack=None):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout_ms / 1000 + 30)
        try:
            s.connect(self.uds)
            s.sendall(f"CONNECT {self.port}\n".encode())
            line = b""
            while not line.endswith(b"\n"):
                c = s.recv(1)
                if not c or len(line) > 64:
                    raise AgentError(f"vsock bridge: no OK for port {self.port}: {line!r}")
                line += c
            if not line.startswith(b"OK "):
                raise AgentError(f"vsock bridge refused port {self.port}: {line!r}")
            return agent_request(s, argv, timeout_ms=timeout_ms, on_ack=on_ack)
        finally:
            s.close()

    def close(self):
        pass


class TtyChannel:
    """The launcher's control line (/dev/ttyS1 <-> unix socket): frames in turn."""

    def __init__(self, uds):
        self.uds = uds
        self.sock = None

    def exec(self, argv, timeout_ms=STEP_TIMEOUT_MS, on_ack=None):
        if self.sock is None:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.connect(self.uds)
        self.sock.settimeout(timeout_ms / 1000 + 30)
        try:
            return agent_request(self.sock, argv, timeout_ms=timeout_ms, on_ack=on_ack)
        except (OSError, AgentError):
            self.close()  # the stream is out of step: start over next time
            raise

    def close(self):
        if self.sock:
            self.sock.close()
            self.sock = None
