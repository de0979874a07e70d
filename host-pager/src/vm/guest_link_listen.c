// SPDX-License-Identifier: GPL-2.0-only
/*
 * guest_link_listen.c - hybrid unix socket and AF_VSOCK listeners for the
 * guest link; see guest_link_listen.h.
 *
 * Both listeners are a struct acceptor: a non-blocking listening socket on
 * the loop that accepts a bounded number of connections per wakeup and,
 * when accept(2) runs out of fds or memory, stops watching for
 * GUEST_LINK_ACCEPT_RETRY_MS instead of spinning on a level-triggered
 * event it cannot clear.
 *
 * Per-VM state (vm->link_listener): the hybrid acceptor and the registered
 * CID.  Daemon-wide state (d->link_vsock): the AF_VSOCK acceptor and its
 * counters; it exists while a VM has a CID registered or the listener was
 * started explicitly.  The CID registry is the VMs themselves: a lookup
 * walks d->vms, O(VMs) per accepted connection, fine for the tens of VMs a
 * host runs and one less structure to keep consistent.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <linux/vm_sockets.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "guest_link.h"
#include "guest_link_listen.h"
#include "log.h"
#include "loop.h"
#include "usock.h"

#define NSEC_PER_MSEC		1000000ULL
#define UNIX_PATH_MAX		sizeof(((struct sockaddr_un *)0)->sun_path)
#define HYBRID_SOCKET_MODE	0600
/* Port numbers in "<uds>_<port>": up to 10 digits and the '_'. */
#define HYBRID_SUFFIX_MAX	12U
/* Connection log lines at info level per listener, then debug level. */
#define LISTEN_LOG_NOISY_MAX	16U
#define VSOCK_SUBJECT		"vsock listener"
/* The host-to-guest vsock transport; without it no guest can connect. */
#define VHOST_VSOCK_DEV		"/dev/vhost-vsock"

struct acceptor;
typedef void (*acceptor_conn_cb)(struct acceptor *a, int cfd,
				 const struct sockaddr_storage *peer,
				 socklen_t peer_len);

struct acceptor {
	struct loop *loop;
	int fd;				/* listening socket, -1: none */
	const char *subject;		/* log prefix */
	const char *what;		/* "<path>" or "vsock port N" */
	struct loop_timer retry;	/* re-watch after resource errors */
	acceptor_conn_cb conn;
	uint64_t *errors;		/* owner's accept error counter */
};

struct guest_link_listener {
	struct vm *vm;
	struct acceptor hybrid;
	char path[UNIX_PATH_MAX];	/* the socket file we bound */
	struct usock_id id;		/* and its identity, to remove only it */
	bool has_cid;
	uint32_t cid;
	unsigned int conn_logged;
	struct guest_link_listen_stats st;
};

struct guest_link_vsock_listener {
	struct vmnapd *d;
	struct acceptor acc;
	char what[sizeof("vsock port 4294967295")];
	uint32_t port;			/* 0: not listening */
	bool pinned;			/* opened by guest_link_listen_vsock_start */
	unsigned int nr_cids;		/* VMs registered */
	unsigned int stranger_logged;
	struct guest_link_vsock_stats st;
};

/* ---- acceptor ---- */

static void acceptor_event(struct loop *l, int fd, uint32_t events, void *arg);

static void acceptor_rewatch(struct loop *l, struct loop_timer *t, void *arg)
{
	struct acceptor *a = arg;
	int err;

	(void)t;
	if (a->fd < 0)
		return;
	err = loop_add_fd(l, a->fd, EPOLLIN, acceptor_event, a);
	if (err) {
		log_err(a->subject, "watch %s again: %s", a->what, strerror(-err));
		loop_timer_arm(l, &a->retry, GUEST_LINK_ACCEPT_RETRY_MS * NSEC_PER_MSEC);
	}
}

static bool accept_out_of_resources(int err)
{
	return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

static void acceptor_event(struct loop *l, int fd, uint32_t events, void *arg)
{
	struct acceptor *a = arg;

	(void)events;
	for (unsigned int i = 0; i < GUEST_LINK_ACCEPTS_PER_WAKEUP; i++) {
		struct sockaddr_storage peer;
		socklen_t peer_len = sizeof(peer);
		int cfd = accept4(fd, (struct sockaddr *)&peer, &peer_len,
				  SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (cfd < 0) {
			int err = errno;

			if (err == EAGAIN || err == EWOULDBLOCK)
				return;
			if (err == EINTR || err == ECONNABORTED)
				continue;	/* the peer gave up: not ours */
			(*a->errors)++;
			log_warn(a->subject, "accept on %s: %s", a->what, strerror(err));
			if (accept_out_of_resources(err)) {
				loop_del_fd(l, fd);
				loop_timer_arm(l, &a->retry,
					       GUEST_LINK_ACCEPT_RETRY_MS * NSEC_PER_MSEC);
			}
			return;
		}
		a->conn(a, cfd, &peer, peer_len);
		if (a->fd != fd)
			return;		/* closed meanwhile */
	}
}

static void acceptor_init(struct acceptor *a, struct loop *loop,
			  const char *subject, const char *what,
			  acceptor_conn_cb conn, uint64_t *errors)
{
	a->loop = loop;
	a->fd = -1;
	a->subject = subject;
	a->what = what;
	a->conn = conn;
	a->errors = errors;
	loop_timer_init(&a->retry, acceptor_rewatch, a);
}

/* Watch the listening socket @fd; takes it (closed on error).  -errno. */
static int acceptor_start(struct acceptor *a, int fd)
{
	int err = loop_add_fd(a->loop, fd, EPOLLIN, acceptor_event, a);

	if (err) {
		close(fd);
		return err;
	}
	a->fd = fd;
	return 0;
}

static void acceptor_stop(struct acceptor *a)
{
	if (a->fd < 0)
		return;
	loop_timer_cancel(a->loop, &a->retry);
	loop_del_fd(a->loop, a->fd);	/* harmless when resting */
	close(a->fd);
	a->fd = -1;
}

/* ---- handing a connection to a VM ---- */

/* Attach @cfd to @vm's guest link (newest wins).  Takes @cfd.  -errno. */
static int attach_to_vm(struct guest_link_listener *ll, int cfd, const char *from)
{
	struct vm *vm = ll->vm;
	const char *replaces = NULL;
	int err;

	if (!vm->link) {
		ll->st.no_link++;
		if (ll->conn_logged < LISTEN_LOG_NOISY_MAX) {
			ll->conn_logged++;
			log_warn(vm->subject, "guest link connection %s closed: "
				 "the VM has no guest link", from);
		} else {
			log_debug(vm->subject, "guest link connection %s closed: no link",
				  from);
		}
		close(cfd);
		return -ENOLINK;
	}
	if (guest_link_state(vm->link) != GUEST_LINK_CLOSED) {
		ll->st.sessions_replaced++;
		replaces = guest_link_state_name(guest_link_state(vm->link));
	}
	if (ll->conn_logged < LISTEN_LOG_NOISY_MAX) {
		ll->conn_logged++;
		log_info(vm->subject, "guest link connection %s%s%s%s", from,
			 replaces ? ", replacing the session in state " : "",
			 replaces ? replaces : "",
			 ll->conn_logged == LISTEN_LOG_NOISY_MAX ?
			 " (more connections logged at debug level)" : "");
	} else {
		log_debug(vm->subject, "guest link connection %s%s", from,
			  replaces ? ", replacing the session" : "");
	}
	err = guest_link_attach_fd(vm->link, cfd);	/* takes cfd */
	if (err == -EAGAIN) {
		/* over the link's reconnect limit: the link counts and logs it */
		ll->st.attach_errors++;
		if (replaces)
			ll->st.sessions_replaced--;
		log_debug(vm->subject, "guest link connection %s: %s", from, strerror(-err));
	} else if (err) {
		ll->st.attach_errors++;
		log_warn(vm->subject, "guest link connection %s: %s", from, strerror(-err));
	}
	return err;
}

static void hybrid_conn(struct acceptor *a, int cfd,
			const struct sockaddr_storage *peer, socklen_t peer_len);

static struct guest_link_listener *listener_get(struct vm *vm)
{
	struct guest_link_listener *ll = vm->link_listener;

	if (ll)
		return ll;
	ll = calloc(1, sizeof(*ll));
	if (!ll)
		return NULL;
	ll->vm = vm;
	acceptor_init(&ll->hybrid, vm->d->loop, vm->subject, ll->path, hybrid_conn,
		      &ll->st.accept_errors);
	vm->link_listener = ll;
	return ll;
}

/* ---- hybrid unix socket ---- */

static void hybrid_conn(struct acceptor *a, int cfd,
			const struct sockaddr_storage *peer, socklen_t peer_len)
{
	struct guest_link_listener *ll =
		(struct guest_link_listener *)((char *)a -
			offsetof(struct guest_link_listener, hybrid));
	struct ucred cred;
	socklen_t cred_len = sizeof(cred);
	char from[UNIX_PATH_MAX + 32];

	(void)peer;
	(void)peer_len;
	ll->st.hybrid_accepts++;
	if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) == 0)
		snprintf(from, sizeof(from), "on %s (pid %d)", ll->path, (int)cred.pid);
	else
		snprintf(from, sizeof(from), "on %s", ll->path);
	attach_to_vm(ll, cfd, from);
}

int guest_link_listen_unix(struct vm *vm, const char *path)
{
	struct guest_link_listener *ll;
	struct usock_id id;
	int fd, err;

	if (!path || !path[0])
		return -EINVAL;
	if (strlen(path) >= UNIX_PATH_MAX) {
		log_err(vm->subject, "hybrid socket path too long: %s", path);
		return -ENAMETOOLONG;
	}
	if (vm->link_listener && vm->link_listener->hybrid.fd >= 0) {
		log_err(vm->subject, "already listens on %s", vm->link_listener->path);
		return -EEXIST;
	}
	ll = listener_get(vm);
	if (!ll)
		return -ENOMEM;
	fd = usock_listen(path, HYBRID_SOCKET_MODE, GUEST_LINK_LISTEN_BACKLOG,
			  vm->subject, &id);
	if (fd < 0) {
		log_err(vm->subject, "cannot listen on %s: %s", path,
			usock_listen_strerror(fd));
		return fd;
	}
	snprintf(ll->path, sizeof(ll->path), "%s", path);
	ll->id = id;
	err = acceptor_start(&ll->hybrid, fd);
	if (err) {
		usock_unlink(ll->path, &ll->id);
		log_err(vm->subject, "watch %s: %s", path, strerror(-err));
		return err;
	}
	log_info(vm->subject, "guest link listens on %s", path);
	return 0;
}

int guest_link_listen_hybrid(struct vm *vm, const char *uds_base, uint32_t port)
{
	char path[UNIX_PATH_MAX + HYBRID_SUFFIX_MAX];
	int n;

	if (!uds_base || !uds_base[0] || !port)
		return -EINVAL;
	n = snprintf(path, sizeof(path), "%s_%" PRIu32, uds_base, port);
	if (n < 0 || (size_t)n >= UNIX_PATH_MAX) {
		log_err(vm->subject, "hybrid socket path too long: %s_%" PRIu32,
			uds_base, port);
		return -ENAMETOOLONG;
	}
	return guest_link_listen_unix(vm, path);
}

/* Remove the socket file only while it is the one we bound. */
static void hybrid_remove_file(struct guest_link_listener *ll)
{
	int err = usock_unlink(ll->path, &ll->id);

	if (err == -ESTALE)
		log_info(ll->vm->subject, "%s was replaced meanwhile: leaving it",
			 ll->path);
	else if (err)
		log_warn(ll->vm->subject, "remove %s: %s", ll->path, strerror(-err));
}

/* ---- AF_VSOCK ---- */

static bool cid_valid(uint32_t cid)
{
	return cid >= GUEST_LINK_VSOCK_MIN_CID && cid != VMADDR_CID_ANY;
}

struct vm *guest_link_vsock_find_cid(struct vmnapd *d, uint32_t cid)
{
	for (struct vm *vm = d->vms; vm; vm = vm->next) {
		const struct guest_link_listener *ll = vm->link_listener;

		if (ll && ll->has_cid && ll->cid == cid)
			return vm;
	}
	return NULL;
}

static void vsock_conn(struct acceptor *a, int cfd,
		       const struct sockaddr_storage *peer, socklen_t peer_len)
{
	struct guest_link_vsock_listener *vl =
		(struct guest_link_vsock_listener *)((char *)a -
			offsetof(struct guest_link_vsock_listener, acc));
	const struct sockaddr_vm *svm = (const struct sockaddr_vm *)peer;

	vl->st.accepts++;
	if (peer_len < sizeof(*svm) || svm->svm_family != AF_VSOCK) {
		vl->st.bad_peer++;
		log_warn(VSOCK_SUBJECT, "connection without a vsock peer address: closed");
		close(cfd);
		return;
	}
	if (svm->svm_port >= GUEST_LINK_RESERVED_PORT_END) {
		vl->st.unreserved_port++;
		if (guest_link_log_nth(vl->st.unreserved_port))
			log_warn(VSOCK_SUBJECT, "connection from cid %u port %u refused: "
				 "not a reserved port (%" PRIu64 " so far)",
				 svm->svm_cid, svm->svm_port, vl->st.unreserved_port);
		close(cfd);
		return;
	}
	guest_link_vsock_route(vl->d, cfd, svm->svm_cid);
}

static struct guest_link_vsock_listener *vsock_state_get(struct vmnapd *d)
{
	struct guest_link_vsock_listener *vl = d->link_vsock;

	if (vl)
		return vl;
	vl = calloc(1, sizeof(*vl));
	if (!vl)
		return NULL;
	vl->d = d;
	acceptor_init(&vl->acc, d->loop, VSOCK_SUBJECT, vl->what, vsock_conn,
		      &vl->st.accept_errors);
	d->link_vsock = vl;
	return vl;
}

/* Free the daemon-wide state once nothing uses it. */
static void vsock_state_put(struct vmnapd *d)
{
	struct guest_link_vsock_listener *vl = d->link_vsock;

	if (!vl || vl->nr_cids || vl->pinned)
		return;
	if (vl->port)
		log_info(VSOCK_SUBJECT, "no VM left: closing %s", vl->what);
	acceptor_stop(&vl->acc);
	free(vl);
	d->link_vsock = NULL;
}

static int vsock_open(uint32_t port)
{
	struct sockaddr_vm svm = {
		.svm_family = AF_VSOCK,
		.svm_cid = VMADDR_CID_ANY,
		.svm_port = port,
	};
	int fd, err;

	fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&svm, sizeof(svm)) < 0 ||
	    listen(fd, GUEST_LINK_LISTEN_BACKLOG) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

/* Make sure the listener is up on @port.  -errno, logged. */
static int vsock_listen(struct guest_link_vsock_listener *vl, uint32_t port)
{
	int fd, err;

	if (vl->port == port)
		return 0;
	if (vl->port) {
		log_err(VSOCK_SUBJECT, "already on port %" PRIu32 ", not %" PRIu32,
			vl->port, port);
		return -EBUSY;
	}
	if (!port || port == VMADDR_PORT_ANY)
		return -EINVAL;
	fd = vsock_open(port);
	if (fd < 0) {
		log_err(VSOCK_SUBJECT, "cannot listen on vsock port %" PRIu32 ": %s%s",
			port, strerror(-fd),
			fd == -EAFNOSUPPORT ? " (kernel without AF_VSOCK)" :
			fd == -EADDRNOTAVAIL ? " (no vsock transport: is /dev/vhost-vsock there?)" :
			"");
		return fd;
	}
	snprintf(vl->what, sizeof(vl->what), "vsock port %" PRIu32, port);
	err = acceptor_start(&vl->acc, fd);
	if (err) {
		log_err(VSOCK_SUBJECT, "watch %s: %s", vl->what, strerror(-err));
		return err;
	}
	vl->port = port;
	log_info(VSOCK_SUBJECT, "guest links listen on %s", vl->what);
	if (access(VHOST_VSOCK_DEV, F_OK) < 0)
		log_warn(VSOCK_SUBJECT, "%s: %s: guests reach %s only through a vsock "
			 "transport this host lacks", VHOST_VSOCK_DEV, strerror(errno),
			 vl->what);
	return 0;
}

int guest_link_listen_vsock_start(struct vmnapd *d, uint32_t port)
{
	struct guest_link_vsock_listener *vl = vsock_state_get(d);
	int err;

	if (!vl)
		return -ENOMEM;
	err = vsock_listen(vl, port);
	if (!err)
		vl->pinned = true;
	vsock_state_put(d);
	return err;
}

void guest_link_listen_vsock_stop(struct vmnapd *d)
{
	struct guest_link_vsock_listener *vl = d->link_vsock;

	if (!vl)
		return;
	if (vl->port)
		log_info(VSOCK_SUBJECT, "closing %s", vl->what);
	acceptor_stop(&vl->acc);
	vl->port = 0;
	vl->pinned = false;
	vsock_state_put(d);
}

uint32_t guest_link_listen_vsock_port(const struct vmnapd *d)
{
	return d->link_vsock ? d->link_vsock->port : 0;
}

int guest_link_vsock_register_cid(struct vm *vm, uint32_t cid)
{
	struct guest_link_vsock_listener *vl;
	struct guest_link_listener *ll;
	struct vm *other;

	if (!cid_valid(cid)) {
		log_err(vm->subject, "vsock CID %" PRIu32 " is not a guest CID", cid);
		return -EINVAL;
	}
	other = guest_link_vsock_find_cid(vm->d, cid);
	if (other || (vm->link_listener && vm->link_listener->has_cid)) {
		log_err(vm->subject, "vsock CID %" PRIu32 ": %s", cid,
			other ? other->subject : "this VM has a CID already");
		return -EEXIST;
	}
	vl = vsock_state_get(vm->d);
	ll = vl ? listener_get(vm) : NULL;
	if (!ll) {
		vsock_state_put(vm->d);
		return -ENOMEM;
	}
	ll->has_cid = true;
	ll->cid = cid;
	vl->nr_cids++;
	log_info(vm->subject, "guest link takes vsock connections from CID %" PRIu32, cid);
	return 0;
}

void guest_link_vsock_unregister_cid(struct vm *vm)
{
	struct guest_link_listener *ll = vm->link_listener;

	if (!ll || !ll->has_cid)
		return;
	ll->has_cid = false;
	if (vm->d->link_vsock && vm->d->link_vsock->nr_cids)
		vm->d->link_vsock->nr_cids--;
	vsock_state_put(vm->d);
}

int guest_link_listen_vsock(struct vm *vm, uint32_t cid, uint32_t port)
{
	int err = guest_link_vsock_register_cid(vm, cid);

	if (err)
		return err;
	err = vsock_listen(vm->d->link_vsock, port);
	if (err)
		guest_link_vsock_unregister_cid(vm);
	return err;
}

int guest_link_vsock_route(struct vmnapd *d, int fd, uint32_t cid)
{
	struct guest_link_vsock_listener *vl = d->link_vsock;
	struct vm *vm = guest_link_vsock_find_cid(d, cid);
	char from[sizeof("from vsock CID 4294967295")];

	if (!vm) {
		if (vl) {
			vl->st.unknown_cid++;
			if (vl->stranger_logged < LISTEN_LOG_NOISY_MAX) {
				vl->stranger_logged++;
				log_warn(VSOCK_SUBJECT, "connection from CID %" PRIu32
					 ", which no VM has: closed%s", cid,
					 vl->stranger_logged == LISTEN_LOG_NOISY_MAX ?
					 " (more logged at debug level)" : "");
			} else {
				log_debug(VSOCK_SUBJECT, "connection from unknown CID %"
					  PRIu32 ": closed", cid);
			}
		}
		close(fd);
		return -ENOENT;
	}
	vm->link_listener->st.vsock_accepts++;
	snprintf(from, sizeof(from), "from vsock CID %" PRIu32, cid);
	return attach_to_vm(vm->link_listener, fd, from);
}

/* ---- life cycle and queries ---- */

void guest_link_listen_vm_detach(struct vm *vm)
{
	struct guest_link_listener *ll = vm->link_listener;

	if (!ll)
		return;
	if (ll->hybrid.fd >= 0) {
		acceptor_stop(&ll->hybrid);
		hybrid_remove_file(ll);
	}
	guest_link_vsock_unregister_cid(vm);
	free(ll);
	vm->link_listener = NULL;
}

void guest_link_listen_get_stats(const struct vm *vm,
				 struct guest_link_listen_stats *st)
{
	if (vm->link_listener)
		*st = vm->link_listener->st;
	else
		memset(st, 0, sizeof(*st));
}

void guest_link_listen_vsock_get_stats(const struct vmnapd *d,
				       struct guest_link_vsock_stats *st)
{
	if (d->link_vsock)
		*st = d->link_vsock->st;
	else
		memset(st, 0, sizeof(*st));
}
