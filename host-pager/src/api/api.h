/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * api.h - the control API: HTTP/1.1 + JSON on <run_dir>/api.sock (0600),
 * served by libmicrohttpd on vmnapd's event loop (the loop accepts on the
 * socket and hands each connection to MHD, MHD's epoll fd is watched by
 * the loop, MHD_run() runs there, MHD's timeout arms a loop timer) and
 * jansson for every body.  Every path is also served under /v1/ (the
 * unprefixed ones are its aliases).  api_routes[] in api.c is the route
 * table; api/openapi.yaml documents it (tests/api/openapi.py compares the
 * two and validates live answers against the document's schemas):
 *
 *   GET    /                              daemon version
 *   GET    /host                          memory for admission
 *   GET    /metrics                       Prometheus text (metrics.h)
 *   GET    /vms                           every VM
 *   PUT    /vms/{vm}                      register: {"pause": {"backend":
 *                                         "qmp|freezer|firecracker|chv",
 *                                         "path": P, "timeout_ms": N},
 *                                         "link": {"unix": P} | {"hybrid":
 *                                         UDS, "port": N} | {"vsock_cid": N},
 *                                         "link_socket": P (= link.unix),
 *                                         "vmm_pid": N (PSS, cgroup memory;
 *                                         QMP learns it by itself), "vsock":
 *                                         {"vhost_user": P, "cid": N,
 *                                         "uds": P}, "managed": bool,
 *                                         "policy": {coordinator keys}}
 *   GET    /vms/{vm}                      state, counters, evidence, pager
 *   PATCH  /vms/{vm}                      {"managed": bool, "policy": {...},
 *                                         "pause": {...}}
 *   DELETE /vms/{vm}                      unregister (resumes it first)
 *   GET    /vms/{vm}/waits                the waits held
 *   POST   /vms/{vm}/waits                {"id": ID, "kind": "model|network|
 *                                         file", "confirm": bool}
 *   POST   /vms/{vm}/waits/{id}/ready     the response is there
 *   POST   /vms/{vm}/waits/{id}/delivered the guest took it (confirm waits)
 *   POST   /vms/{vm}/events               external event: {"source": S}
 *   POST   /vms/{vm}/actions/{pause|offload|resume}
 *
 * Errors are {"error": "text", "status": N} with 400 (malformed JSON,
 * bad field, unusable path), 404 (no such VM, wait or route), 405, 409
 * (state conflict, path held), 413 (body over api.max_body_bytes), 502 /
 * 504 (VMM answered wrongly / late), 503 (out of memory or fds), 500
 * (anything else); errno_status() in api.c maps each errno, the README
 * lists them.  Headers beyond MHD's connection memory limit are refused
 * by MHD itself (431/413).
 */
#ifndef VMNAP_API_H
#define VMNAP_API_H

#include "vmnapd.h"

#define API_SOCKET_NAME		"api.sock"

/* Listen on @path (NULL: <run_dir>/api.sock).  d->api.  -errno. */
int api_start(struct vmnapd *d, const char *path);
void api_stop(struct vmnapd *d);

#endif
