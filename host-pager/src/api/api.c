// SPDX-License-Identifier: GPL-2.0-only
/* api.c - the control API over HTTP/1.1 + JSON; see api.h. */
#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "api.h"
#include "config.h"
#include "coord.h"
#include "events.h"
#include "log.h"
#include "usock.h"
#include "metrics.h"
#include "pager.h"
#include "pressure_watch.h"
#include "vhost_vsock.h"
#include "vm_control.h"

#define API_BACKLOG		128
#define API_ACCEPT_BATCH	64	/* connections taken per listen-socket event */
#define API_SWEEP_NS		(1000 * NS_PER_MS)	/* request deadline check */
#define API_CONN_MEMORY		(32 * 1024)	/* headers + buffers per connection */
#define API_MAX_SEGMENTS	7	/* /v1/vms/NAME/waits/ID/ready + 1 */
#define API_VERSION_PREFIX	"v1"
#define API_WAIT_ID_MAX		COORD_WAIT_ID_MAX
#define API_SOURCE_MAX		128
#define NS_PER_MS		1000000ull
#define VMNAPD_API_VERSION	"1"

#define HTTP_OK			200
#define HTTP_CREATED		201
#define HTTP_ACCEPTED		202
#define HTTP_NO_CONTENT		204
#define HTTP_BAD_REQUEST	400
#define HTTP_NOT_FOUND		404
#define HTTP_METHOD_NOT_ALLOWED	405
#define HTTP_CONFLICT		409
#define HTTP_TOO_LARGE		413
#define HTTP_INTERNAL		500
#define HTTP_BAD_GATEWAY	502
#define HTTP_UNAVAILABLE	503
#define HTTP_GATEWAY_TIMEOUT	504

/*
 * One client connection, from MHD's start notification to its close
 * notification.  @since_ns is when its current request began: the accept,
 * or the end of the previous request on a kept-alive connection.
 */
struct api_conn {
	struct api_conn *prev, *next;
	struct MHD_Connection *mhd;
	int fd;
	uint64_t since_ns;
	bool evicted;		/* shut down by us; MHD closes it next */
};

struct api {
	struct vmnapd *d;
	struct MHD_Daemon *mhd;
	int listen_fd;
	struct usock_id listen_id;	/* remove only the socket we bound */
	int mhd_epfd;
	struct loop_timer timer;	/* MHD's own timeout */
	struct loop_timer sweep;	/* request deadlines */
	struct loop_timer relisten;	/* accepting again after EMFILE */
	char path[108];
	size_t max_body;
	unsigned int max_conns;
	uint64_t req_timeout_ns;
	struct api_conn *conns, *conns_tail;	/* oldest first */
	unsigned int nr_conns, nr_evicted;
	uint64_t requests, client_errors;
	uint64_t evictions, expired, refused;
};

/* Per request, kept across MHD's calls while the body arrives. */
struct api_req {
	char *body;
	size_t len;
	bool too_large;
};

/* What a handler produces. */
struct api_reply {
	unsigned int status;
	json_t *json;		/* body, or NULL */
	char *text;		/* text/plain body instead (malloc'ed), or NULL */
	size_t text_len;
};

/* One request as the router hands it to its handler. */
struct api_call {
	struct api *a;
	struct api_req *rq;
	const char *name;	/* the path's {vm}, or NULL */
	const char *id;		/* the path's {id}, or NULL */
	struct vm *vm;		/* {vm} found (ROUTE_VM, ROUTE_COORD), or NULL */
};

enum {
	ROUTE_VM	= 1,	/* {vm} must exist: else 404 */
	ROUTE_COORD	= 2,	/* ... and have a coordinator: else 409 */
};

struct api_route {
	const char *method;
	const char *path;
	void (*fn)(struct api_call *c, struct api_reply *r);
	unsigned int flags;
};

static void reply_error(struct api_reply *r, unsigned int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void reply_error(struct api_reply *r, unsigned int status, const char *fmt, ...)
{
	char raw[256], msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	/* it may quote the client's bytes: jansson takes only valid UTF-8 */
	log_sanitize(msg, sizeof(msg), raw, sizeof(raw));
	json_decref(r->json);
	r->status = status;
	r->json = json_pack("{s:s,s:i}", "error", msg, "status", (int)status);
}

static void reply_json(struct api_reply *r, unsigned int status, json_t *j)
{
	json_decref(r->json);
	r->status = status;
	r->json = j;
}

/*
 * Every errno a part can return has a status, each documented (README,
 * "Control API"): 404 nothing by that name; 409 in conflict with a state
 * or with whatever holds a path (a live socket, another file); 400 the
 * request names something vmnapd cannot use (a path, socket, cgroup,
 * process); 503 vmnapd is short of memory or descriptors (try again);
 * 502 / 504 a VMM answered wrongly / not in time; 500 anything else.
 */
static unsigned int errno_status(int err)
{
	switch (err) {
	case -ENOENT:
		return HTTP_NOT_FOUND;
	case -EEXIST: case -EALREADY: case -EBUSY: case -EOPNOTSUPP: case -ENOSPC:
	case -EADDRINUSE: case -ETXTBSY: case -EISCONN: case -EINPROGRESS:
		return HTTP_CONFLICT;
	case -EINVAL: case -ENAMETOOLONG: case -ENOTSOCK: case -ENOTDIR: case -EACCES:
	case -EPERM: case -ESRCH: case -ECONNREFUSED: case -ELOOP: case -EISDIR: case -EROFS:
	case -ENXIO: case -ENODEV: case -EAFNOSUPPORT: case -EADDRNOTAVAIL:
	case -EPROTOTYPE: case -EFAULT: case -EXDEV: case -EOVERFLOW: case -ERANGE:
	case -EDOM: case -ESPIPE: case -EFBIG: case -ENOTEMPTY: case -EMLINK:
		return HTTP_BAD_REQUEST;
	case -ENOMEM: case -EMFILE: case -ENFILE: case -ENOBUFS: case -EAGAIN:
	case -EDQUOT: case -EUSERS:
		return HTTP_UNAVAILABLE;
	case -EPROTO: case -ECONNRESET: case -EPIPE: case -EBADMSG: case -EMSGSIZE:
	case -ENOTCONN:
		return HTTP_BAD_GATEWAY;
	case -ETIMEDOUT:
		return HTTP_GATEWAY_TIMEOUT;
	default:
		return HTTP_INTERNAL;
	}
}

/* ---- body parsing --------------------------------------------------- */

/* The body as a JSON object; an empty body is {}.  NULL after replying 400. */
static json_t *body_object(struct api_req *rq, struct api_reply *r)
{
	json_error_t jerr;
	json_t *j;

	if (!rq->len)
		return json_object();
	j = json_loadb(rq->body, rq->len, JSON_REJECT_DUPLICATES, &jerr);
	if (!j) {
		reply_error(r, HTTP_BAD_REQUEST, "malformed JSON at %d:%d: %s", jerr.line,
			    jerr.column, jerr.text);
		return NULL;
	}
	if (!json_is_object(j)) {
		json_decref(j);
		reply_error(r, HTTP_BAD_REQUEST, "body must be a JSON object");
		return NULL;
	}
	return j;
}

/* Keys of @obj must all be in @allowed (NULL-terminated). */
static bool keys_known(json_t *obj, const char *const *allowed, const char *where,
		       struct api_reply *r)
{
	const char *key;
	json_t *v;

	json_object_foreach(obj, key, v) {
		const char *const *a;

		for (a = allowed; *a && strcmp(*a, key); a++)
			;
		if (!*a) {
			reply_error(r, HTTP_BAD_REQUEST, "%s: unknown key \"%.64s\"", where, key);
			return false;
		}
	}
	return true;
}

static bool wait_id_valid(const char *id)
{
	size_t n = strnlen(id, API_WAIT_ID_MAX);

	if (!n || n >= API_WAIT_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = id[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == '-' || c == ':'))
			return false;
	}
	return true;
}

/* A string member that is a path of at most @max - 1 bytes. */
static bool get_path(json_t *obj, const char *key, char *out, size_t max, bool required,
		     const char *where, struct api_reply *r)
{
	json_t *v = json_object_get(obj, key);

	if (!v) {
		if (required)
			reply_error(r, HTTP_BAD_REQUEST, "%s.%s: required", where, key);
		return !required;
	}
	if (!json_is_string(v) || !json_string_length(v) || json_string_length(v) >= max ||
	    strlen(json_string_value(v)) != json_string_length(v)) {
		reply_error(r, HTTP_BAD_REQUEST, "%s.%s: want a path shorter than %zu bytes",
			    where, key, max);
		return false;
	}
	memcpy(out, json_string_value(v), json_string_length(v) + 1);
	return true;
}

/* ---- handlers ------------------------------------------------------- */

static void h_root(struct api_call *c, struct api_reply *r)
{
	struct api *a = c->a;
	unsigned int n = 0;

	for (struct vm *vm = a->d->vms; vm; vm = vm->next)
		n++;
	reply_json(r, HTTP_OK, json_pack("{s:s,s:s,s:i,s:I,s:o,s:{s:i,s:I,s:I,s:I}}", "name",
					 "vmnapd", "api_version", VMNAPD_API_VERSION, "vms", (int)n,
					 "event_seq", (json_int_t)a->d->event_seq,
					 "rejections", metrics_rejections_json(a->d),
					 "api", "connections", (int)a->nr_conns,
					 "evicted", (json_int_t)a->evictions,
					 "expired", (json_int_t)a->expired,
					 "refused", (json_int_t)a->refused));
}

static void h_metrics(struct api_call *c, struct api_reply *r)
{
	r->text = metrics_render(c->a->d, &r->text_len);
	if (!r->text)
		reply_error(r, HTTP_UNAVAILABLE, "out of memory");
	else
		r->status = HTTP_OK;
}

/* GET /host: memory for admission */
static void h_host(struct api_call *c, struct api_reply *r)
{
	reply_json(r, HTTP_OK, pressure_watch_host_json(c->a->d));
}

static void h_list(struct api_call *c, struct api_reply *r)
{
	json_t *arr = json_array();

	for (struct vm *vm = c->a->d->vms; vm; vm = vm->next)
		json_array_append_new(arr, vm_control_json(vm));
	reply_json(r, HTTP_OK, json_pack("{s:o}", "vms", arr));
}

static bool parse_policy(json_t *v, struct coord_config *cfg, struct api_reply *r)
{
	char err[CONFIG_ERR_LEN];

	if (config_coord_from_json(v, cfg, err, sizeof(err))) {
		reply_error(r, HTTP_BAD_REQUEST, "policy: %s", err);
		return false;
	}
	return true;
}

static bool parse_pause(json_t *v, struct pause_spec *ps, struct api_reply *r)
{
	static const char *const pkeys[] = { "backend", "path", "timeout_ms", "allow_clock_stop",
					     NULL };
	json_t *b, *t, *acs;
	int kind;

	if (!json_is_object(v)) {
		reply_error(r, HTTP_BAD_REQUEST, "pause: want an object");
		return false;
	}
	if (!keys_known(v, pkeys, "pause", r))
		return false;
	b = json_object_get(v, "backend");
	kind = json_is_string(b) ? pause_kind_parse(json_string_value(b)) : -1;
	if (kind < 0) {
		reply_error(r, HTTP_BAD_REQUEST,
			    "pause.backend: want \"qmp\", \"freezer\", \"firecracker\" or \"chv\"");
		return false;
	}
	ps->kind = (enum pause_kind)kind;
	if (!get_path(v, "path", ps->path, sizeof(ps->path), true, "pause", r))
		return false;
	t = json_object_get(v, "timeout_ms");
	if (t && (!json_is_integer(t) || json_integer_value(t) < 1 ||
		  json_integer_value(t) > 600000)) {
		reply_error(r, HTTP_BAD_REQUEST, "pause.timeout_ms: want 1..600000");
		return false;
	}
	ps->timeout_ms = t ? (uint32_t)json_integer_value(t) : 0;
	acs = json_object_get(v, "allow_clock_stop");
	if (acs && !json_is_boolean(acs)) {
		reply_error(r, HTTP_BAD_REQUEST, "pause.allow_clock_stop: want true or false");
		return false;
	}
	ps->allow_clock_stop = json_is_true(acs);
	return true;
}

/* "restore": "eager" | "working-set" | "lazy" | "recurring" (enum pager_restore) */
static bool parse_restore(json_t *v, int *how, struct api_reply *r)
{
	char err[128];

	if (config_restore_from_json(v, how, err, sizeof(err))) {
		reply_error(r, HTTP_BAD_REQUEST, "%s", err);
		return false;
	}
	return true;
}

static bool parse_pid(json_t *v, pid_t *pid, struct api_reply *r)
{
	if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > INT32_MAX) {
		reply_error(r, HTTP_BAD_REQUEST, "vmm_pid: want a process id");
		return false;
	}
	*pid = (pid_t)json_integer_value(v);
	return true;
}

/* "link": {"unix": P} | {"hybrid": UDS, "port": N} | {"vsock_cid": N, "port": N} */
static bool parse_link(json_t *v, struct vm_control_spec *spec, struct api_reply *r)
{
	static const char *const keys[] = { "unix", "hybrid", "vsock_cid", "port", NULL };
	json_t *cid = json_object_get(v, "vsock_cid"), *port = json_object_get(v, "port");
	int kinds;

	if (!json_is_object(v)) {
		reply_error(r, HTTP_BAD_REQUEST, "link: want an object");
		return false;
	}
	if (!keys_known(v, keys, "link", r))
		return false;
	kinds = !!json_object_get(v, "unix") + !!json_object_get(v, "hybrid") + !!cid;
	if (kinds != 1 || spec->link_kind != VM_LINK_NONE) {
		reply_error(r, HTTP_BAD_REQUEST,
			    "link: exactly one of \"unix\", \"hybrid\", \"vsock_cid\"");
		return false;
	}
	if (port && (!json_is_integer(port) || json_integer_value(port) < 1 ||
		     json_integer_value(port) > (json_int_t)UINT32_MAX)) {
		reply_error(r, HTTP_BAD_REQUEST, "link.port: want 1..2^32-1");
		return false;
	}
	spec->link_port = port ? (uint32_t)json_integer_value(port) : 0;
	if (cid) {
		if (!json_is_integer(cid) || json_integer_value(cid) < 3 ||
		    json_integer_value(cid) > (json_int_t)UINT32_MAX) {
			reply_error(r, HTTP_BAD_REQUEST, "link.vsock_cid: want an integer >= 3");
			return false;
		}
		spec->link_kind = VM_LINK_VSOCK;
		spec->link_cid = (uint32_t)json_integer_value(cid);
		return true;
	}
	if (json_object_get(v, "unix")) {
		spec->link_kind = VM_LINK_UNIX;
		return get_path(v, "unix", spec->link_path, sizeof(spec->link_path), true, "link", r);
	}
	spec->link_kind = VM_LINK_HYBRID;
	/* room for "_<port>" */
	return get_path(v, "hybrid", spec->link_path, sizeof(spec->link_path) - 12, true, "link", r);
}

static bool parse_vsock(json_t *v, struct vhost_vsock_config *cfg, char *vu, char *uds,
			size_t max, struct api_reply *r)
{
	static const char *const keys[] = { "vhost_user", "cid", "uds", NULL };
	json_t *cid;

	if (!json_is_object(v)) {
		reply_error(r, HTTP_BAD_REQUEST, "vsock: want an object");
		return false;
	}
	if (!keys_known(v, keys, "vsock", r) ||
	    !get_path(v, "vhost_user", vu, max, true, "vsock", r) ||
	    !get_path(v, "uds", uds, max, true, "vsock", r))
		return false;
	cid = json_object_get(v, "cid");
	if (!json_is_integer(cid) || json_integer_value(cid) < 3 ||
	    json_integer_value(cid) > (json_int_t)UINT32_MAX) {
		reply_error(r, HTTP_BAD_REQUEST, "vsock.cid: want an integer >= 3");
		return false;
	}
	cfg->vhost_user_path = vu;
	cfg->uds_path = uds;
	cfg->guest_cid = (uint64_t)json_integer_value(cid);
	return true;
}

static void h_register(struct api_call *c, struct api_reply *r)
{
	struct api *a = c->a;
	const char *name = c->name;
	static const char *const keys[] = { "pause", "link", "link_socket", "vsock", "managed",
					    "policy", "vmm_pid", "restore", NULL };
	struct vm_control_spec spec = { 0 };
	struct vhost_vsock_config vcfg = { 0 };
	char vu[108], uds[108], err[256] = "";
	json_t *body, *v;
	bool has_vsock = false, created = false;
	int ret, restore = -1;
	struct vm *vm;

	body = body_object(c->rq, r);
	if (!body)
		return;
	if (!keys_known(body, keys, "body", r))
		goto out;
	v = json_object_get(body, "pause");
	if (v) {
		if (!parse_pause(v, &spec.pause, r))
			goto out;
		spec.has_pause = true;
	}
	if (!get_path(body, "link_socket", spec.link_path, sizeof(spec.link_path), false,
		      "body", r))	/* shorthand for "link": {"unix": P} */
		goto out;
	if (spec.link_path[0])
		spec.link_kind = VM_LINK_UNIX;
	v = json_object_get(body, "link");
	if (v && !parse_link(v, &spec, r))
		goto out;
	v = json_object_get(body, "vmm_pid");
	if (v && !parse_pid(v, &spec.vmm_pid, r))
		goto out;
	v = json_object_get(body, "managed");
	if (v && !json_is_boolean(v)) {
		reply_error(r, HTTP_BAD_REQUEST, "managed: want true or false");
		goto out;
	}
	spec.managed = json_is_true(v);
	v = json_object_get(body, "policy");
	spec.policy = a->d->settings ? a->d->settings->coord : spec.policy;
	if (!a->d->settings)
		coord_config_default(&spec.policy);
	if (v) {
		if (!parse_policy(v, &spec.policy, r))
			goto out;
		spec.has_policy = true;
	}
	v = json_object_get(body, "vsock");
	if (v) {
		if (!parse_vsock(v, &vcfg, vu, uds, sizeof(vu), r))
			goto out;
		has_vsock = true;
	}
	v = json_object_get(body, "restore");
	if (v && !parse_restore(v, &restore, r))
		goto out;

	vm = vm_find(a->d, name);
	if (vm && vm->control) {
		reply_error(r, HTTP_CONFLICT, "VM %s is already registered", name);
		goto out;
	}
	if (!vm) {
		vm = vm_new(a->d, name);
		if (!vm) {
			reply_error(r, errno_status(-errno), "cannot create VM %s: %s", name,
				    strerror(errno));
			goto out;
		}
		created = true;
	}
	if (has_vsock && !vm->vsock) {
		ret = vm_vsock_attach(vm, &vcfg);
		if (ret) {
			reply_error(r, errno_status(ret), "vsock device: %s", strerror(-ret));
			if (created)
				vm_free(vm);
			goto out;
		}
	}
	ret = vm_control_attach(vm, &spec, err, sizeof(err));
	if (ret) {
		/* a missing socket or cgroup is the caller's mistake, not a 404;
		 * -EPERM: managed with a backend that cannot keep guest time */
		reply_error(r, ret == -ENOENT ? HTTP_BAD_REQUEST :
			    ret == -EPERM ? HTTP_CONFLICT : errno_status(ret), "%s",
			    err[0] ? err : strerror(-ret));
		if (created)
			vm_free(vm);
		goto out;
	}
	if (restore >= 0)
		vm_set_restore(vm, restore);
	events_emit(a->d, vm->name, "vm_register",
		    json_pack("{s:s,s:b}", "pause", spec.has_pause ?
			      pause_kind_name(spec.pause.kind) : "none", "managed", spec.managed));
	reply_json(r, created ? HTTP_CREATED : HTTP_OK, vm_control_json(vm));
out:
	json_decref(body);
}

static void h_patch(struct api_call *c, struct api_reply *r)
{
	static const char *const keys[] = { "managed", "policy", "pause", "vmm_pid", "restore",
					    NULL };
	struct api *a = c->a;
	struct vm *vm = c->vm;
	json_t *body = body_object(c->rq, r), *v;

	if (!body)
		return;
	if (!keys_known(body, keys, "body", r))
		goto out;
	v = json_object_get(body, "vmm_pid");
	if (v) {
		pid_t pid;

		if (!parse_pid(v, &pid, r))
			goto out;
		vm_control_set_vmm_pid(vm, pid);
	}
	v = json_object_get(body, "pause");
	if (v) {
		struct pause_spec ps = { 0 };
		char err[256] = "";
		int ret;

		if (!parse_pause(v, &ps, r))
			goto out;
		if (!ps.timeout_ms && a->d->settings)
			ps.timeout_ms = a->d->settings->pause_timeout_ms;
		ret = vm_control_set_pause(vm, &ps, err, sizeof(err));
		if (ret) {
			reply_error(r, ret == -ENOENT ? HTTP_BAD_REQUEST :
				    ret == -EPERM ? HTTP_CONFLICT : errno_status(ret), "%s",
				    err[0] ? err : strerror(-ret));
			goto out;
		}
	}
	v = json_object_get(body, "policy");
	if (v) {
		struct coord_config cfg = *coord_config(vm->coord);	/* keeps guest_clock_stops */

		if (!parse_policy(v, &cfg, r))
			goto out;
		coord_set_config(vm->coord, &cfg);
	}
	v = json_object_get(body, "restore");
	if (v) {
		int how;

		if (!parse_restore(v, &how, r))
			goto out;
		vm_set_restore(vm, how);
		events_emit(vm->d, vm->name, "restore",
			    json_pack("{s:s}", "restore", pager_restore_name(how)));
	}
	v = json_object_get(body, "managed");
	if (v) {
		char err[256] = "";

		if (!json_is_boolean(v)) {
			reply_error(r, HTTP_BAD_REQUEST, "managed: want true or false");
			goto out;
		}
		if (vm_control_set_managed(vm, json_is_true(v), err, sizeof(err))) {
			/* a backend that cannot keep guest time (see vm_control.h) */
			reply_error(r, HTTP_CONFLICT, "%s", err);
			goto out;
		}
		events_emit(vm->d, vm->name, "managed", json_pack("{s:b}", "managed", json_is_true(v)));
	}
	reply_json(r, HTTP_OK, vm_control_json(vm));
out:
	json_decref(body);
}

/* A time in vmnapd's clock (CLOCK_MONOTONIC ns), null when it has not come. */
static json_t *ns_or_null(uint64_t ns)
{
	return ns ? json_integer((json_int_t)ns) : json_null();
}

static json_t *wait_json(const struct coord_wait_info *w)
{
	return json_pack("{s:s,s:s,s:s,s:b,s:f,s:I,s:o,s:o}", "id", w->id,
			 "kind", coord_wait_kind_name(w->kind),
			 "state", coord_wait_state_name(w->state),
			 "confirm", w->confirm,
			 "age_s", (double)w->age_ns / 1e9,
			 "started_ns", (json_int_t)w->start_ns,
			 "ready_ns", ns_or_null(w->ready_ns),
			 "delivered_ns", ns_or_null(w->state == COORD_WS_DELIVERED ? w->end_ns : 0));
}

static void wait_list_one(const struct coord_wait_info *w, void *arg)
{
	json_array_append_new(arg, wait_json(w));
}

/* GET /vms/NAME/waits: the waits the coordinator holds, then the last ones that ended. */
static void h_wait_list(struct api_call *c, struct api_reply *r)
{
	json_t *a = json_array();

	if (a)
		coord_waits_foreach(c->vm->coord, wait_list_one, a);
	reply_json(r, HTTP_OK, json_pack("{s:o}", "waits", a ? a : json_null()));
}

/* GET /vms/NAME/waits/ID: one of them. */
static void h_wait_get(struct api_call *c, struct api_reply *r)
{
	struct coord_wait_info w;

	if (!wait_id_valid(c->id)) {
		reply_error(r, HTTP_BAD_REQUEST, "bad wait id");
		return;
	}
	if (coord_wait_get(c->vm->coord, c->id, &w)) {
		reply_error(r, HTTP_NOT_FOUND, "wait %s: no such wait (or ended long ago)", c->id);
		return;
	}
	reply_json(r, HTTP_OK, wait_json(&w));
}

static void h_wait_start(struct api_call *c, struct api_reply *r)
{
	static const char *const keys[] = { "id", "kind", "confirm", NULL };
	struct vm *vm = c->vm;
	json_t *body = body_object(c->rq, r), *id, *kind, *confirm;
	int k = COORD_WAIT_MODEL, ret;

	if (!body)
		return;
	if (!keys_known(body, keys, "body", r))
		goto out;
	id = json_object_get(body, "id");
	if (!json_is_string(id) || !wait_id_valid(json_string_value(id)) ||
	    strlen(json_string_value(id)) != json_string_length(id)) {
		reply_error(r, HTTP_BAD_REQUEST, "id: want 1..%d of [A-Za-z0-9_.:-]",
			    API_WAIT_ID_MAX - 1);
		goto out;
	}
	kind = json_object_get(body, "kind");
	if (kind && (!json_is_string(kind) || (k = coord_wait_kind_parse(json_string_value(kind))) < 0)) {
		reply_error(r, HTTP_BAD_REQUEST, "kind: want \"model\", \"network\" or \"file\"");
		goto out;
	}
	confirm = json_object_get(body, "confirm");
	if (confirm && !json_is_boolean(confirm)) {
		reply_error(r, HTTP_BAD_REQUEST, "confirm: want true or false");
		goto out;
	}
	ret = coord_wait_start(vm->coord, json_string_value(id), (enum coord_wait_kind)k,
			       json_is_true(confirm) ? COORD_WAIT_CONFIRM : 0);
	if (ret) {
		reply_error(r, errno_status(ret), "wait %s: %s", json_string_value(id),
			    ret == -EEXIST ? "already exists" :
			    ret == -ENOSPC ? "too many waits" : strerror(-ret));
		goto out;
	}
	events_emit(vm->d, vm->name, "wait_start",
		    json_pack("{s:s,s:s}", "wait", json_string_value(id),
			      "kind", coord_wait_kind_name((enum coord_wait_kind)k)));
	reply_json(r, HTTP_CREATED, json_pack("{s:s,s:s,s:s}", "wait", json_string_value(id),
		   "kind", coord_wait_kind_name((enum coord_wait_kind)k),
		   "state", coord_state_name(coord_state(vm->coord))));
out:
	json_decref(body);
}

static void h_wait_op(struct vm *vm, const char *id, const char *op, struct api_reply *r)
{
	struct coord_wait_info w;
	bool ready = !strcmp(op, "ready");
	int ret;

	if (!wait_id_valid(id)) {
		reply_error(r, HTTP_BAD_REQUEST, "bad wait id");
		return;
	}
	if (ready) {
		events_emit(vm->d, vm->name, "wait_ready", json_pack("{s:s}", "wait", id));
		ret = coord_wait_ready(vm->coord, id);
	} else {
		ret = coord_wait_delivered(vm->coord, id);
	}
	if (ret) {
		reply_error(r, errno_status(ret), "wait %s: %s", id,
			    ret == -ENOENT ? "no such wait" :
			    ret == -EALREADY ? (ready ? "already ready" : "already delivered") :
			    ret == -EBUSY ? "data not ready yet" : strerror(-ret));
		return;
	}
	/* "wait_state": delivered when the guest can have the data now */
	reply_json(r, HTTP_OK, json_pack("{s:s,s:s,s:s}", "wait", id,
					 "state", coord_state_name(coord_state(vm->coord)),
					 "wait_state", coord_wait_get(vm->coord, id, &w) ? "delivered" :
					 coord_wait_state_name(w.state)));
}

static void h_wait_ready(struct api_call *c, struct api_reply *r)
{
	h_wait_op(c->vm, c->id, "ready", r);
}

static void h_wait_delivered(struct api_call *c, struct api_reply *r)
{
	h_wait_op(c->vm, c->id, "delivered", r);
}

static void h_event(struct api_call *c, struct api_reply *r)
{
	static const char *const keys[] = { "source", NULL };
	struct vm *vm = c->vm;
	json_t *body = body_object(c->rq, r), *src;
	int ret;

	if (!body)
		return;
	if (!keys_known(body, keys, "body", r))
		goto out;
	src = json_object_get(body, "source");
	if (src && (!json_is_string(src) || json_string_length(src) >= API_SOURCE_MAX)) {
		reply_error(r, HTTP_BAD_REQUEST, "source: want a string shorter than %d",
			    API_SOURCE_MAX);
		goto out;
	}
	events_emit(vm->d, vm->name, "external",
		    json_pack("{s:s}", "source", src ? json_string_value(src) : "api"));
	ret = coord_external_event(vm->coord);
	reply_json(r, HTTP_ACCEPTED, json_pack("{s:b,s:s}", "resumed", ret == 0,
		   "state", coord_state_name(coord_state(vm->coord))));
out:
	json_decref(body);
}

static void h_action(struct vm *vm, const char *action,
		     int (*op)(struct coord *), struct api_reply *r)
{
	int ret = op(vm->coord);

	if (ret) {
		reply_error(r, errno_status(ret), "%s in state %s: %s", action,
			    coord_state_name(coord_state(vm->coord)),
			    ret == -EOPNOTSUPP ? "no pager attached" : strerror(-ret));
		return;
	}
	reply_json(r, HTTP_ACCEPTED, json_pack("{s:s,s:s}", "action", action,
		   "state", coord_state_name(coord_state(vm->coord))));
}

static void h_pause(struct api_call *c, struct api_reply *r)
{
	h_action(c->vm, "pause", coord_manual_pause, r);
}

static void h_offload(struct api_call *c, struct api_reply *r)
{
	h_action(c->vm, "offload", coord_manual_offload, r);
}

static void h_resume(struct api_call *c, struct api_reply *r)
{
	h_action(c->vm, "resume", coord_manual_resume, r);
}

static void h_show(struct api_call *c, struct api_reply *r)
{
	reply_json(r, HTTP_OK, vm_control_json(c->vm));
}

static void h_delete(struct api_call *c, struct api_reply *r)
{
	events_emit(c->a->d, c->vm->name, "vm_delete", NULL);
	vm_free(c->vm);
	r->status = HTTP_NO_CONTENT;
}

/* ---- routing --------------------------------------------------------- */

/*
 * Every route the API serves, the one place they are listed.  A path's
 * "{vm}" segment is a VM name (checked: 400), "{id}" a wait id (checked by
 * its handler); any other segment matches itself.  tests/api/openapi.py
 * reads this table and compares it with api/openapi.yaml both ways: keep
 * one entry per line, in this form.
 */
static const struct api_route api_routes[] = {
	{ "GET",	"/",				h_root,			0 },
	{ "GET",	"/metrics",			h_metrics,		0 },
	{ "GET",	"/host",			h_host,			0 },
	{ "GET",	"/vms",				h_list,			0 },
	{ "PUT",	"/vms/{vm}",			h_register,		0 },
	{ "GET",	"/vms/{vm}",			h_show,			ROUTE_VM },
	{ "PATCH",	"/vms/{vm}",			h_patch,		ROUTE_COORD },
	{ "DELETE",	"/vms/{vm}",			h_delete,		ROUTE_VM },
	{ "GET",	"/vms/{vm}/waits",		h_wait_list,		ROUTE_COORD },
	{ "GET",	"/vms/{vm}/waits/{id}",		h_wait_get,		ROUTE_COORD },
	{ "POST",	"/vms/{vm}/waits",		h_wait_start,		ROUTE_COORD },
	{ "POST",	"/vms/{vm}/waits/{id}/ready",	h_wait_ready,		ROUTE_COORD },
	{ "POST",	"/vms/{vm}/waits/{id}/delivered", h_wait_delivered,	ROUTE_COORD },
	{ "POST",	"/vms/{vm}/events",		h_event,		ROUTE_COORD },
	{ "POST",	"/vms/{vm}/actions/pause",	h_pause,		ROUTE_COORD },
	{ "POST",	"/vms/{vm}/actions/offload",	h_offload,		ROUTE_COORD },
	{ "POST",	"/vms/{vm}/actions/resume",	h_resume,		ROUTE_COORD },
};

/* Split @url into at most API_MAX_SEGMENTS '/'-separated segments (in @buf). */
static int split_path(const char *url, char *buf, size_t n, char **seg)
{
	int nseg = 0;
	char *p, *save = NULL;

	if (strlen(url) >= n)
		return -1;
	strcpy(buf, url);
	for (p = strtok_r(buf, "/", &save); p; p = strtok_r(NULL, "/", &save)) {
		if (nseg == API_MAX_SEGMENTS)
			return -1;
		seg[nseg++] = p;
	}
	return nseg;
}

/* Does @pattern match the @n segments?  Captures {vm} and {id} in @c. */
static bool route_match(const char *pattern, char **seg, int n, struct api_call *c)
{
	const char *p = pattern;
	int i = 0;

	c->name = c->id = NULL;
	while (*p == '/')
		p++;
	while (*p) {
		const char *end = strchrnul(p, '/');
		size_t len = (size_t)(end - p);

		if (i == n)
			return false;
		if (len == 4 && !strncmp(p, "{vm}", 4))
			c->name = seg[i];
		else if (len == 4 && !strncmp(p, "{id}", 4))
			c->id = seg[i];
		else if (strlen(seg[i]) != len || strncmp(p, seg[i], len))
			return false;
		i++;
		p = *end ? end + 1 : end;
	}
	return i == n;
}

static void route(struct api *a, const char *method, const char *url, struct api_req *rq,
		  struct api_reply *r)
{
	char buf[512];
	char *seg[API_MAX_SEGMENTS];
	int n = split_path(url, buf, sizeof(buf), seg);
	struct api_call c = { .a = a, .rq = rq };
	const struct api_route *rt = NULL;
	bool path_known = false;

	/*
	 * Versioned paths: /v1/X is X.  The unprefixed paths stay as
	 * aliases of /v1 (README.md, "Control API").
	 */
	if (n > 0 && !strcmp(seg[0], API_VERSION_PREFIX)) {
		memmove(seg, seg + 1, (size_t)(n - 1) * sizeof(*seg));
		n--;
	}
	for (size_t i = 0; n >= 0 && i < sizeof(api_routes) / sizeof(api_routes[0]); i++) {
		if (!route_match(api_routes[i].path, seg, n, &c))
			continue;
		path_known = true;
		if (!strcmp(method, api_routes[i].method)) {
			rt = &api_routes[i];
			break;
		}
	}
	if (!rt) {
		if (path_known)
			reply_error(r, HTTP_METHOD_NOT_ALLOWED, "method %.16s not allowed here",
				    method);
		else	/* quotes the client's bytes: reply_error sanitises them */
			reply_error(r, HTTP_NOT_FOUND, "no such resource: %.128s", url);
		return;
	}
	if (c.name && !vm_name_valid(c.name)) {
		reply_error(r, HTTP_BAD_REQUEST, "bad VM name (1..%d of [A-Za-z0-9_.-])",
			    VM_NAME_MAX - 1);
		return;
	}
	if (rt->flags & (ROUTE_VM | ROUTE_COORD)) {
		c.vm = vm_find(a->d, c.name);
		if (!c.vm) {
			reply_error(r, HTTP_NOT_FOUND, "no VM %s", c.name);
			return;
		}
		if ((rt->flags & ROUTE_COORD) && !c.vm->coord) {
			reply_error(r, HTTP_CONFLICT, "VM %s has no coordinator: PUT it first",
				    c.name);
			return;
		}
	}
	rt->fn(&c, r);
}

/* ---- libmicrohttpd glue --------------------------------------------- */

static enum MHD_Result send_reply(struct MHD_Connection *conn, struct api_reply *r)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;
	const char *ctype = "application/json";

	if (r->text) {
		resp = MHD_create_response_from_buffer(r->text_len, r->text, MHD_RESPMEM_MUST_FREE);
		ctype = "text/plain; version=0.0.4";
		r->text = NULL;
	} else if (r->json) {
		char *s = json_dumps(r->json, JSON_COMPACT);
		size_t n;

		if (!s)
			return MHD_NO;
		n = strlen(s);
		s = realloc(s, n + 2);	/* newline for curl users */
		if (!s)
			return MHD_NO;
		s[n] = '\n';
		s[n + 1] = '\0';
		resp = MHD_create_response_from_buffer(n + 1, s, MHD_RESPMEM_MUST_FREE);
	} else {
		resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
	}
	if (!resp)
		return MHD_NO;
	if (r->status != HTTP_NO_CONTENT)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	ret = MHD_queue_response(conn, r->status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version,
				  const char *upload_data, size_t *upload_data_size, void **con_cls)
{
	struct api *a = cls;
	struct api_req *rq = *con_cls;
	struct api_reply r = { .status = HTTP_INTERNAL };
	enum MHD_Result ret;

	(void)version;
	if (!rq) {
		rq = calloc(1, sizeof(*rq));
		if (!rq)
			return MHD_NO;
		*con_cls = rq;
		return MHD_YES;
	}
	if (*upload_data_size) {
		size_t n = *upload_data_size;

		if (!rq->too_large && rq->len + n > a->max_body) {
			rq->too_large = true;
			free(rq->body);
			rq->body = NULL;
			rq->len = 0;
		}
		if (!rq->too_large) {
			char *b = realloc(rq->body, rq->len + n + 1);

			if (!b)
				return MHD_NO;
			memcpy(b + rq->len, upload_data, n);
			rq->body = b;
			rq->len += n;
			rq->body[rq->len] = '\0';
		}
		*upload_data_size = 0;	/* consumed (or discarded) */
		return MHD_YES;
	}
	a->requests++;
	if (rq->too_large)
		reply_error(&r, HTTP_TOO_LARGE, "body over %zu bytes", a->max_body);
	else
		route(a, method, url, rq, &r);
	if (r.status >= HTTP_BAD_REQUEST) {
		a->client_errors++;
		log_info(NULL, "api: %s %s -> %u", LOG_STRN(method, 16), LOG_STR(url), r.status);
	} else {
		log_debug(NULL, "api: %s %s -> %u", LOG_STRN(method, 16), LOG_STR(url), r.status);
	}
	ret = send_reply(conn, &r);
	json_decref(r.json);
	free(r.text);
	return ret;
}

/* ---- connections: accepted here, limited, evicted, deadlined --------- */

/*
 * vmnapd accepts on the API socket itself and hands each connection to MHD
 * (MHD_add_connection): the listening socket stays in the loop's epoll set
 * for good, so no connection count can leave the API deaf.  At most
 * max_conns connections are kept; a new one evicts the connection whose
 * current request has waited longest (a client trickling headers or idling
 * loses its place to one that asks now), and a request that is not
 * answered within the connection timeout of its start is dropped whatever
 * bytes still trickle in.  Evicting is shutdown(2) of the socket: MHD sees
 * the end of the stream on its next run and closes and forgets it.
 */
static struct api_conn *conn_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

static void conn_evict(struct api *a, struct api_conn *c)
{
	if (c->evicted)
		return;
	shutdown(c->fd, SHUT_RDWR);
	c->evicted = true;
	a->nr_evicted++;
}

/* Evict the connection whose request has waited longest; false if none. */
static bool evict_oldest(struct api *a)
{
	struct api_conn *victim = NULL;

	for (struct api_conn *c = a->conns; c; c = c->next)
		if (!c->evicted && (!victim || c->since_ns < victim->since_ns))
			victim = c;
	if (!victim)
		return false;
	conn_evict(a, victim);
	a->evictions++;
	return true;
}

static void on_sweep(struct loop *l, struct loop_timer *t, void *arg)
{
	struct api *a = arg;
	uint64_t now = now_ns();

	for (struct api_conn *c = a->conns; c; c = c->next) {
		if (!c->evicted && now - c->since_ns >= a->req_timeout_ns) {
			conn_evict(a, c);
			a->expired++;
		}
	}
	if (a->nr_conns)
		loop_timer_arm(l, t, API_SWEEP_NS);
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct api *a = cls;
	struct api_conn *c = *socket_context;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);

		c = calloc(1, sizeof(*c));
		if (!c) {
			if (ci)	/* untracked: let MHD close it at once */
				shutdown(ci->connect_fd, SHUT_RDWR);
			return;
		}
		c->mhd = conn;
		c->fd = ci ? ci->connect_fd : -1;
		c->since_ns = now_ns();
		c->prev = a->conns_tail;
		if (a->conns_tail)
			a->conns_tail->next = c;
		else
			a->conns = c;
		a->conns_tail = c;
		a->nr_conns++;
		*socket_context = c;
		if (!a->sweep.armed)
			loop_timer_arm(a->d->loop, &a->sweep, API_SWEEP_NS);
		if (c->fd < 0)
			conn_evict(a, c);
		return;
	}
	if (!c)
		return;
	if (c->prev)
		c->prev->next = c->next;
	else
		a->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		a->conns_tail = c->prev;
	if (c->evicted)
		a->nr_evicted--;
	a->nr_conns--;
	free(c);
	*socket_context = NULL;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct api_req *rq = *con_cls;
	struct api_conn *c = conn_of(conn);

	(void)cls;
	(void)toe;
	if (c)		/* the next request on this connection starts now */
		c->since_ns = now_ns();
	if (rq) {
		free(rq->body);
		free(rq);
		*con_cls = NULL;
	}
}

static void api_rearm(struct api *a)
{
	MHD_UNSIGNED_LONG_LONG ms;

	if (MHD_get_timeout(a->mhd, &ms) == MHD_YES)
		loop_timer_arm(a->d->loop, &a->timer, (uint64_t)ms * NS_PER_MS);
	else
		loop_timer_cancel(a->d->loop, &a->timer);
}

static void on_mhd_fd(struct loop *l, int fd, uint32_t events, void *arg)
{
	struct api *a = arg;

	(void)l;
	(void)fd;
	(void)events;
	MHD_run(a->mhd);
	api_rearm(a);
}

static void on_mhd_timer(struct loop *l, struct loop_timer *t, void *arg)
{
	struct api *a = arg;

	(void)l;
	(void)t;
	MHD_run(a->mhd);
	api_rearm(a);
}

/* Out of fds or memory: stop accepting for a moment (the listening socket
 * is level-triggered and would spin), then look again. */
static void on_relisten(struct loop *l, struct loop_timer *t, void *arg)
{
	struct api *a = arg;

	(void)t;
	loop_mod_fd(l, a->listen_fd, EPOLLIN);
}

static void on_listen(struct loop *l, int fd, uint32_t events, void *arg)
{
	struct api *a = arg;

	(void)events;
	for (int i = 0; i < API_ACCEPT_BATCH; i++) {
		struct sockaddr_un sa;
		socklen_t len = sizeof(sa);
		int cfd = accept4(fd, (struct sockaddr *)&sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (cfd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				log_warn(NULL, "api: cannot accept: %s; pausing 100 ms",
					 strerror(errno));
				evict_oldest(a);
				loop_mod_fd(l, fd, 0);
				loop_timer_arm(l, &a->relisten, 100 * NS_PER_MS);
			} else if (errno != EAGAIN) {
				log_warn(NULL, "api: accept: %s", strerror(errno));
			}
			break;
		}
		if (a->nr_conns - a->nr_evicted >= a->max_conns)
			evict_oldest(a);
		if (a->nr_conns >= a->max_conns + API_ACCEPT_BATCH) {
			close(cfd);	/* evicted ones not yet gone: MHD's run closes them */
			a->refused++;
			continue;
		}
		if (len < sizeof(sa_family_t)) {
			sa.sun_family = AF_UNIX;
			len = sizeof(sa_family_t);
		}
		if (MHD_add_connection(a->mhd, cfd, (struct sockaddr *)&sa, len) != MHD_YES)
			a->refused++;	/* MHD closed it */
	}
	MHD_run(a->mhd);
	api_rearm(a);
}

/*
 * libmicrohttpd's own messages.  Every API connection is AF_UNIX, where
 * the TCP options it tries on each response (TCP_NODELAY, TCP_CORK) do not
 * exist; it reports each failed attempt, three lines per request, although
 * nothing is wrong.  Those go to debug, everything else is a warning.
 */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	static const char *const tcp_only[] = {
		"Setting %s option to %s state failed",
		"Failed to push the data from buffers",
	};
	int level = LOG_WARN;

	(void)cls;
	for (size_t i = 0; i < sizeof(tcp_only) / sizeof(tcp_only[0]); i++)
		if (!strncmp(fmt, tcp_only[i], strlen(tcp_only[i])))
			level = LOG_DEBUG;
	log_vmsg(level, "api", fmt, ap);
}

int api_start(struct vmnapd *d, const char *path)
{
	const struct vmnapd_settings *s = d->settings;
	struct api *a = calloc(1, sizeof(*a));
	const union MHD_DaemonInfo *info;
	unsigned int timeout_s;
	int err;

	if (!a)
		return -ENOMEM;
	a->d = d;
	a->max_body = s ? s->api_max_body : CONFIG_DEFAULT_API_BODY;
	a->max_conns = s ? s->api_max_conns : CONFIG_DEFAULT_API_CONNS;
	timeout_s = s ? s->api_conn_timeout_s : CONFIG_DEFAULT_API_TIMEOUT_S;
	a->req_timeout_ns = (uint64_t)timeout_s * 1000 * NS_PER_MS;
	loop_timer_init(&a->timer, on_mhd_timer, a);
	loop_timer_init(&a->sweep, on_sweep, a);
	loop_timer_init(&a->relisten, on_relisten, a);
	if (path)
		snprintf(a->path, sizeof(a->path), "%s", path);
	else if ((size_t)snprintf(a->path, sizeof(a->path), "%s/%s", d->cfg.run_dir,
				  API_SOCKET_NAME) >= sizeof(a->path)) {
		free(a);
		return -ENAMETOOLONG;
	}
	a->listen_fd = usock_listen(a->path, 0600, API_BACKLOG, "api", &a->listen_id);
	if (a->listen_fd < 0) {
		err = a->listen_fd;
		log_err(NULL, "api: cannot listen on %s: %s", a->path, usock_listen_strerror(err));
		free(a);
		return err;
	}
	a->mhd = MHD_start_daemon(MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET,
				  0, NULL, NULL,
				  on_request, a,
				  MHD_OPTION_EXTERNAL_LOGGER, mhd_log, a,
				  MHD_OPTION_CONNECTION_LIMIT,
				  a->max_conns + API_ACCEPT_BATCH + 1,
				  MHD_OPTION_CONNECTION_TIMEOUT, timeout_s,
				  MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)API_CONN_MEMORY,
				  MHD_OPTION_NOTIFY_COMPLETED, on_completed, a,
				  MHD_OPTION_NOTIFY_CONNECTION, on_connection, a,
				  MHD_OPTION_END);
	if (!a->mhd) {
		log_err(NULL, "api: libmicrohttpd failed to start on %s", a->path);
		close(a->listen_fd);
		usock_unlink(a->path, &a->listen_id);
		free(a);
		return -EIO;
	}
	info = MHD_get_daemon_info(a->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	a->mhd_epfd = info ? info->epoll_fd : -1;
	err = a->mhd_epfd < 0 ? -EIO : loop_add_fd(d->loop, a->mhd_epfd, EPOLLIN, on_mhd_fd, a);
	if (!err) {
		err = loop_add_fd(d->loop, a->listen_fd, EPOLLIN, on_listen, a);
		if (err)
			loop_del_fd(d->loop, a->mhd_epfd);
	}
	if (err) {
		MHD_stop_daemon(a->mhd);
		close(a->listen_fd);
		usock_unlink(a->path, &a->listen_id);
		free(a);
		return err;
	}
	d->api = a;
	log_info(NULL, "api: listening on %s", a->path);
	return 0;
}

void api_stop(struct vmnapd *d)
{
	struct api *a = d->api;

	if (!a)
		return;
	loop_timer_cancel(d->loop, &a->timer);
	loop_timer_cancel(d->loop, &a->sweep);
	loop_timer_cancel(d->loop, &a->relisten);
	loop_del_fd(d->loop, a->listen_fd);
	loop_del_fd(d->loop, a->mhd_epfd);
	MHD_stop_daemon(a->mhd);	/* closes every connection (notifies each) */
	while (a->conns) {		/* none left, unless MHD did not notify */
		struct api_conn *c = a->conns;

		a->conns = c->next;
		free(c);
	}
	close(a->listen_fd);
	usock_unlink(a->path, &a->listen_id);
	free(a);
	d->api = NULL;
}
