#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""openapi.py - api/openapi.yaml against what vmnapd really serves.

Static part: the document is well formed (OpenAPI 3.1 skeleton, every $ref
resolves, every schema is a valid JSON Schema 2020-12, every {param} of a
path is declared), and the route table in host-pager/src/api/api.c
(api_routes[]) and the document's paths agree both ways: every served
(method, path) documented, every documented one served.  The comparison is
first run on a copy with one route dropped and one added, which it must
report (the check checks itself).

Live part: a real vmnapd (its own run dir) with one VM registered (cgroup v1
freezer on a fake directory, the guest link peer tests/api/fake_guest.py)
and one wait started; every documented GET route is requested under /v1/
and unprefixed, and each answer must have a documented status, the
documented content type and, for JSON, validate against the documented
schema.  Documented errors too: an unknown VM (404), a wrong method (405),
an unknown version (404) answer the Error schema.

    openapi.py                      static + live (own vmnapd), TAP
    openapi.py --live SOCK VM       only the live GETs against a running
                                    vmnapd whose VM is VM (QEMU tests)
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import proc  # noqa: E402
import tap  # noqa: E402
from replay.vmnapd import UnixHTTPConnection  # noqa: E402

DOC = os.path.join(ROOT, "api", "openapi.yaml")
API_C = os.path.join(ROOT, "host-pager", "src", "api", "api.c")
BUILD = os.environ.get("BUILD", "build")
METHODS = ("get", "put", "post", "patch", "delete", "head", "options", "trace")

try:
    import yaml
    import jsonschema
except ImportError as e:  # scripts/deps.sh installs both
    print(f"1..0 # SKIP {e.name} not installed (python3-yaml, python3-jsonschema)")
    sys.exit(0)


# ---- the document ----------------------------------------------------------

def ref_target(doc, ref):
    if not ref.startswith("#/"):
        raise KeyError(f"external $ref {ref}")
    node = doc
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def inline(doc, node, depth=0):
    """@node with every local $ref replaced by its target (siblings kept)."""
    if depth > 50:
        raise RecursionError("$ref cycle")
    if isinstance(node, list):
        return [inline(doc, x, depth + 1) for x in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = inline(doc, ref_target(doc, node["$ref"]), depth + 1)
        rest = {k: inline(doc, v, depth + 1) for k, v in node.items() if k != "$ref"}
        if not rest:
            return target
        return {"allOf": [target], **rest}
    return {k: inline(doc, v, depth + 1) for k, v in node.items()}


def all_refs(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                yield v
            else:
                yield from all_refs(v)
    elif isinstance(node, list):
        for x in node:
            yield from all_refs(x)


def doc_routes(doc):
    """{(METHOD, path)} of the document."""
    return {(m.upper(), p) for p, item in doc.get("paths", {}).items()
            for m in item if m in METHODS}


def served_routes(src):
    """{(METHOD, path)} of api.c's api_routes[] table."""
    m = re.search(r"api_routes\[\]\s*=\s*\{(.*?)\n\};", src, re.S)
    if not m:
        return None
    return set(re.findall(r'\{\s*"([A-Z]+)",\s*"([^"]*)",\s*\w+,\s*[\w|]+\s*\}', m.group(1)))


def compare(served, documented):
    """Problems (strings) between the two route sets; [] when they agree."""
    out = []
    for method, path in sorted(served - documented):
        methods = sorted(m for m, p in documented if p == path)
        out.append(f"served, not documented: {method} {path}" +
                   (f" (documented methods: {', '.join(methods)})" if methods else ""))
    for method, path in sorted(documented - served):
        out.append(f"documented, not served: {method} {path}")
    return out


def static_checks(doc):
    tap.ok(str(doc.get("openapi", "")).startswith("3.1"),
           f"OpenAPI 3.1 document (openapi: {doc.get('openapi')})")
    tap.ok(all(k in doc for k in ("info", "paths", "components")) and
           doc["info"].get("version") == "1", "info, paths, components; API version 1")
    servers = [s.get("url", "") for s in doc.get("servers", [])]
    tap.ok(any(u.endswith("/v1") for u in servers) and "/v1/" in doc["info"]["description"],
           "the /v1 versioning rule is stated (servers and description)",
           f"servers: {servers}" if not servers else None)
    bad = []
    for r in set(all_refs(doc)):
        try:
            ref_target(doc, r)
        except (KeyError, TypeError) as e:
            bad.append(f"{r}: {e}")
    tap.ok(not bad, "every $ref resolves", "\n".join(bad))
    bad = []
    for name, s in doc["components"]["schemas"].items():
        try:
            jsonschema.Draft202012Validator.check_schema(inline(doc, s))
        except jsonschema.SchemaError as e:
            bad.append(f"{name}: {e.message}")
    tap.ok(not bad, f"{len(doc['components']['schemas'])} component schemas are valid "
           "JSON Schema 2020-12", "\n".join(bad))
    bad = []
    for path, item in doc["paths"].items():
        params = {p["name"] for p in inline(doc, item.get("parameters", []))
                  if p.get("in") == "path"}
        for m in (m for m in item if m in METHODS):
            op = item[m]
            mine = params | {p["name"] for p in inline(doc, op.get("parameters", []))
                             if p.get("in") == "path"}
            if set(re.findall(r"\{(\w+)\}", path)) != mine:
                bad.append(f"{m.upper()} {path}: path parameters {sorted(mine)}")
            if not op.get("responses") or not op.get("operationId"):
                bad.append(f"{m.upper()} {path}: no responses or operationId")
    tap.ok(not bad, "every operation: operationId, responses, its path parameters declared",
           "\n".join(bad))


def route_checks(doc):
    with open(API_C) as f:
        served = served_routes(f.read())
    tap.ok(bool(served), f"api.c's route table read: {len(served or ())} routes")
    if not served:
        return
    documented = doc_routes(doc)
    # the comparison must see a dropped and an added route
    mutated = set(documented)
    dropped = sorted(mutated)[0]
    mutated.discard(dropped)
    mutated.add(("GET", "/no/such/route"))
    found = compare(served, mutated)
    seen = (any(dropped[1] in p and p.startswith("served, not") for p in found) and
            any("/no/such/route" in p and p.startswith("documented, not") for p in found))
    tap.ok(seen, "the comparison reports a dropped and an invented route",
           None if seen else "\n".join(found))
    problems = compare(served, documented)
    tap.ok(not problems, f"{len(served)} served routes == {len(documented)} documented "
           "(paths and methods)", "\n".join(problems))


# ---- live ------------------------------------------------------------------

def request(sock, method, url, body=None):
    c = UnixHTTPConnection(sock, 10)
    try:
        c.request(method, url, body=json.dumps(body) if body is not None else None)
        r = c.getresponse()
        return r.status, r.getheader("Content-Type", ""), r.read()
    finally:
        c.close()


def validate(doc, schema, data):
    v = jsonschema.Draft202012Validator(inline(doc, schema))
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
            for e in sorted(v.iter_errors(data), key=lambda e: list(e.absolute_path))]


def check_answer(doc, op, url, status, ctype, body):
    """Problems with one answer against the operation @op documents."""
    resp = op["responses"].get(str(status))
    if resp is None:
        return [f"status {status} not documented"]
    resp = inline(doc, resp)
    content = resp.get("content", {})
    if not content:
        return [] if not body else [f"{status}: documented without a body, got {len(body)} bytes"]
    want = next((t for t in content if ctype.split(";")[0].strip() == t.split(";")[0].strip()),
                None)
    if want is None:
        return [f"Content-Type {ctype!r}, documented {sorted(content)}"]
    if not want.startswith("application/json"):
        return [] if body else ["empty body"]
    try:
        data = json.loads(body)
    except ValueError as e:
        return [f"not JSON: {e}"]
    return validate(doc, content[want]["schema"], data)


def live_checks(doc, sock, vm, strict=True, wait="none"):
    """Every documented GET, {id} being the wait @wait; @strict: each must be
    200 (else any documented status, e.g. 409 for the waits of a VM no PUT
    registered, 404 for a wait that does not exist)."""
    params = {"vm": vm, "id": wait}
    for method, path in sorted(doc_routes(doc)):
        if method != "GET":
            continue
        op = doc["paths"][path]["get"]
        url = re.sub(r"\{(\w+)\}", lambda m: params[m.group(1)], path)
        for prefix in ("/v1", ""):
            full = prefix + url if url != "/" or not prefix else prefix + "/"
            status, ctype, body = request(sock, "GET", full)
            problems = check_answer(doc, op, full, status, ctype, body)
            if strict and status != 200:
                problems.append(f"status {status}: {body[:200]!r}")
            tap.ok(not problems, f"GET {full} ({status}) answers its documented schema",
                   "\n".join(problems[:20]))
    err = doc["components"]["schemas"]["Error"]
    for method, url, status, op in (
            ("GET", "/v1/vms/no-such-vm", 404, doc["paths"]["/vms/{vm}"]["get"]),
            ("DELETE", "/v1/metrics", 405, None), ("GET", "/v2/vms", 404, None)):
        got, ctype, body = request(sock, method, url)
        problems = [] if got == status else [f"status {got}, want {status}"]
        if op is not None:
            problems += check_answer(doc, op, url, got, ctype, body)
        else:
            try:
                problems += validate(doc, err, json.loads(body))
            except ValueError as e:
                problems.append(f"not JSON: {e}")
        tap.ok(not problems, f"{method} {url} is {status} with the Error schema",
               "\n".join(problems))


def run_own_vmnapd(doc):
    vmnapd = os.path.join(BUILD, "vmnapd")
    if not os.access(vmnapd, os.X_OK):
        tap.ok(False, f"{vmnapd} built")
        return
    with tempfile.TemporaryDirectory(prefix="vmnap-openapi.") as t:
        run, cg = os.path.join(t, "run"), os.path.join(t, "cg")
        os.makedirs(cg)
        with open(os.path.join(cg, "freezer.state"), "w") as f:
            f.write("THAWED\n")
        sock, link = os.path.join(run, "api.sock"), os.path.join(t, "vm1.link")
        log = open(os.path.join(t, "vmnapd.log"), "w")
        procs = [subprocess.Popen([vmnapd, "-r", run, "-s", os.path.join(t, "store"),
                                   "-e", os.path.join(t, "events.jsonl")],
                                  stdout=log, stderr=subprocess.STDOUT)]
        try:
            for _ in range(200):
                if os.path.exists(sock):
                    break
                time.sleep(0.05)
            status, _, body = request(sock, "PUT", "/v1/vms/vm1", {
                "pause": {"backend": "freezer", "path": cg}, "link_socket": link,
                "vmm_pid": os.getpid()})
            tap.ok(status == 201, "PUT /v1/vms/vm1 (freezer on a fake directory) is 201",
                   None if status == 201 else body[:300])
            procs.append(subprocess.Popen(
                [sys.executable, os.path.join(ROOT, "tests", "api", "fake_guest.py"), link,
                 "--budget-ms", "10000"], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL))
            up = False
            for _ in range(200):
                _, _, body = request(sock, "GET", "/v1/vms/vm1")
                up = json.loads(body).get("link", {}).get("state") == "up"
                if up:
                    break
                time.sleep(0.05)
            tap.ok(up, "fake guest's link is up (GET /vms/vm1 shows a link object)")
            status, _, body = request(sock, "POST", "/v1/vms/vm1/waits",
                                      {"id": "w1", "kind": "network"})
            tap.ok(status == 201, "a wait started (GET /vms/vm1/waits lists one)",
                   None if status == 201 else body[:300])
            live_checks(doc, sock, "vm1", wait="w1")
        finally:
            for p in reversed(procs):
                proc.stop(p)
            log.close()
            if tap.failed:
                proc.print_tail(os.path.join(t, "vmnapd.log"), "vmnapd")


def main():
    with open(DOC) as f:
        doc = yaml.safe_load(f)
    if len(sys.argv) == 4 and sys.argv[1] == "--live":
        live_checks(doc, sys.argv[2], sys.argv[3], strict=False)
        return tap.done()
    static_checks(doc)
    route_checks(doc)
    run_own_vmnapd(doc)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
