#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""gateway_test.py - replay.py --via gateway without guests (TAP): the
agent's model request through vmnap-gateway to its fake model server (the
step's command comes back, the first event no sooner than wait_ms), waits
raised for a VM vmnapd knows unmanaged, and the side-by-side calibration
of the gateway's overhead.  Real vmnap-gateway and vmnapd from BUILD.
"""
import os
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from replay import gateway, trajectory  # noqa: E402
from replay.common import BUILD  # noqa: E402
from replay.vmnapd import Vmnapd  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
import tap  # noqa: E402

GW = os.path.join(ROOT, BUILD, "vmnap-gateway")
VMNAPD = os.path.join(ROOT, BUILD, "vmnapd")
TRAJ = os.path.join(ROOT, "tests/data/replay-tiny.jsonl")
t = tap.test


def main():
    for exe in (GW, VMNAPD):
        if not os.access(exe, os.X_OK):
            print(f"1..0 # SKIP {exe} not built (make)")
            return 0
    work = tempfile.mkdtemp(prefix="vmnap-gwtest.")
    _, steps = trajectory.load_trajectory(TRAJ)
    vmnapd = Vmnapd(VMNAPD, os.path.join(work, "run"), os.path.join(work, "store"), work,
                    [f"vm0:{os.path.join(work, 'vu.sock')}:3"])
    gw = None
    try:
        vmnapd.wait_for([os.path.join(work, "run", "api.sock")])
        vmnapd.api.register_unmanaged("vm0")
        gw = gateway.Gateway(GW, TRAJ, os.path.join(work, "gw"), work,
                             os.path.join(work, "run", "api.sock"), ["vm0"])

        @t("every step's command comes back through the gateway, status 200")
        def _():
            for st in steps:
                _t0, _t1, _t2, status, content = gateway.model_request(
                    gw.socks["vm0"], st["step"], 0, timeout_s=30)
                assert status == 200, status
                assert content == st["cmd"], (content, st["cmd"])

        @t("first event no sooner than wait_ms, straight and through the gateway")
        def _():
            for path in (gw.model_sock, gw.socks["vm0"]):
                t0, t1, t2, status, _ = gateway.model_request(path, 1, 150, timeout_s=30)
                assert status == 200 and (t1 - t0) / 1e6 >= 150 and t2 >= t1, (path, t1 - t0)

        @t("a wait per request in vmnapd, none unmanaged")
        def _():
            m = gw.metrics()
            want = len(steps) + 1
            assert m.get("vmnap_gateway_waits_started_total") == want, m
            assert m.get("vmnap_gateway_unmanaged_total") == 0, m
            assert vmnapd.api.vm("vm0")["counters"]["waits_started"] == want

        @t("a refused wait shows as unmanaged (the check would catch it)")
        def _():
            gw2 = gateway.Gateway(GW, TRAJ, os.path.join(work, "gw2"), work,
                                  os.path.join(work, "run", "api.sock"), ["nosuchvm"])
            try:
                assert gateway.model_request(gw2.socks["nosuchvm"], 1, 0, timeout_s=30)[3] == 200
                assert gw2.metrics().get("vmnap_gateway_unmanaged_total") == 1
            finally:
                gw2.stop()
    finally:
        if gw:
            gw.stop()
        vmnapd.stop()

    @t("calibration: both paths measured, waits raised for the unmanaged VM")
    def _():
        c = gateway.calibrate(GW, VMNAPD, TRAJ, os.path.join(work, "calib"), 10)
        assert c["requests_each"] == 10
        assert c["gateway_waits_started"] == 15 and c["gateway_unmanaged"] == 0, c
        for k in ("direct_first_byte_p50_ms", "gateway_first_byte_p99_ms",
                  "added_first_byte_p50_ms", "added_total_p99_ms"):
            assert isinstance(c[k], float), (k, c)
        diff = c["gateway_first_byte_p50_ms"] - c["direct_first_byte_p50_ms"]
        assert abs(c["added_first_byte_p50_ms"] - diff) <= 0.002, c

    @t("chunked bodies are put back together")
    def _():
        assert gateway.dechunk(b"3\r\nabc\r\n2;x=1\r\nde\r\n0\r\n\r\n", "t") == b"abcde"
        try:
            gateway.dechunk(b"zz\r\n", "t")
            raise AssertionError("accepted a bad chunk size")
        except gateway.ModelError:
            pass

    @t("metrics: label sets summed per name, comments skipped")
    def _():
        m = gateway.parse_metrics('# HELP x y\nx_total{vm="a",reason="r"} 2\n'
                                  'x_total{vm="b",reason="s"} 3\ny 1\n')
        assert m == {"x_total": 5.0, "y": 1.0}, m

    shutil.rmtree(work, ignore_errors=True)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
