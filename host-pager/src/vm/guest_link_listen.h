/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * guest_link_listen.h - the guest link's socket backends:
 * where vmnapd accepts the guest module's connection to host port 5151 and
 * hands it to the VM's guest link (vm->link) with guest_link_attach_fd().
 *
 *   hybrid   Firecracker / Cloud Hypervisor hybrid vsock: for a guest
 *            connection to host port P the VMM connects to the unix socket
 *            "<uds>_P".  One listener per VM, socket mode 0600.
 *   vsock    a real AF_VSOCK listener (hosts with /dev/vhost-vsock), one
 *            per daemon on a port; an accepted connection goes to the VM
 *            registered with the peer's CID.  A CID nobody registered is
 *            closed, counted and logged.
 *
 * (The third backend, vmnapd's own vhost-user-vsock device, is
 * vhost_vsock.h; it hands port 5151 to vm->link itself.)
 *
 * One session per VM, newest wins: a new connection for a VM ends the
 * session it has (the owner hears disconnect -ECONNRESET) and takes over.
 * The module only reconnects after it gave up its old connection (reset,
 * framing error, link-loss fail-safe), so the newest connection is the live
 * one; the host may not have seen the old one close (a VMM that keeps the
 * unix stream open, a reset lost over a guest reboot), and refusing would
 * lock the guest out until it did, with no keepalive to tell.  Only the VM
 * itself can reach its listener (0600 socket behind its VMM; the CID the
 * host kernel assigns), so a replacement never touches another VM.
 *
 * Socket files: an existing path is reused only when it is a unix socket
 * nobody listens on (a stale one); a live socket gives -EADDRINUSE and any
 * other kind of file (regular, directory, symlink) -EEXIST; neither is
 * touched.  On detach the socket file is removed only while it is still
 * the one vmnapd bound (same device and inode).
 *
 * vm->link is looked up on every connection, so a listener may be set up
 * before or after vm_link_attach(); a connection for a VM without a
 * link is closed and counted.  Everything runs on the loop thread.
 */
#ifndef VMNAP_GUEST_LINK_LISTEN_H
#define VMNAP_GUEST_LINK_LISTEN_H

#include <stdbool.h>
#include <stdint.h>

#include "guest_link.h"
#include "vmnapd.h"

#define GUEST_LINK_LISTEN_BACKLOG	8U
/* Connections accepted per wakeup: a reconnect storm cannot hog the loop. */
#define GUEST_LINK_ACCEPTS_PER_WAKEUP	16U
/* After accept(2) ran out of fds or memory, the listener rests this long. */
#define GUEST_LINK_ACCEPT_RETRY_MS	100U
/* Lowest CID a guest can have (0 hypervisor, 1 local, 2 host). */
#define GUEST_LINK_VSOCK_MIN_CID	3U
struct guest_link_listener;
struct guest_link_vsock_listener;

/* Per VM, since the listener was set up. */
struct guest_link_listen_stats {
	uint64_t hybrid_accepts;	/* connections on "<uds>_<port>" */
	uint64_t vsock_accepts;		/* AF_VSOCK connections from our CID */
	uint64_t sessions_replaced;	/* a new connection ended a session */
	uint64_t no_link;		/* closed: VM has no guest link */
	uint64_t attach_errors;		/* guest_link_attach_fd() failed */
	uint64_t accept_errors;		/* accept(2) failed (hybrid) */
};

/* Daemon-wide AF_VSOCK state, since a VM registered a CID or it started. */
struct guest_link_vsock_stats {
	uint64_t accepts;
	uint64_t unknown_cid;		/* closed: no VM has the peer's CID */
	uint64_t unreserved_port;	/* closed: peer port not reserved */
	uint64_t bad_peer;		/* closed: peer address not AF_VSOCK */
	uint64_t accept_errors;
};

/*
 * Listen on "<uds_base>_<port>" for @vm (port: VMNAP_DEFAULT_PORT unless
 * the guest module was told otherwise).  -EEXIST when @vm listens already
 * or the path is not a socket, -EADDRINUSE when a live socket is there,
 * -ENAMETOOLONG, other -errno from socket/bind/listen.  Logged.
 */
int guest_link_listen_hybrid(struct vm *vm, const char *uds_base, uint32_t port);
/* The same on an exact unix socket path (a test peer, a custom VMM). */
int guest_link_listen_unix(struct vm *vm, const char *path);

/*
 * The AF_VSOCK backend for @vm in one call: register @cid and make sure the
 * daemon-wide listener is up on @port (the first VM opens it; it closes
 * when the last registered VM detaches, unless guest_link_listen_vsock_start
 * opened it).  -EINVAL (bad CID), -EEXIST (CID taken, or @vm has one),
 * -EBUSY (listener up on another port), -EAFNOSUPPORT (no AF_VSOCK),
 * -EADDRINUSE (port taken), other -errno from socket/bind/listen.  A host
 * without /dev/vhost-vsock gets a listener and a warning: no guest can
 * reach it there.  On error nothing is registered.  Logged.
 */
int guest_link_listen_vsock(struct vm *vm, uint32_t cid, uint32_t port);

/*
 * Daemon-wide AF_VSOCK listener on (VMADDR_CID_ANY, @port), kept until
 * guest_link_listen_vsock_stop().  0 when already listening on @port,
 * -EBUSY on another port; errors as above.
 */
int guest_link_listen_vsock_start(struct vmnapd *d, uint32_t port);
/* Close the listener (registrations stay).  No-op when not listening. */
void guest_link_listen_vsock_stop(struct vmnapd *d);
/* The port listened on, 0 when not listening. */
uint32_t guest_link_listen_vsock_port(const struct vmnapd *d);

/* The CID registry alone (no listener is opened).  Errors as above. */
int guest_link_vsock_register_cid(struct vm *vm, uint32_t cid);
void guest_link_vsock_unregister_cid(struct vm *vm);
/* The VM registered with @cid, or NULL. */
struct vm *guest_link_vsock_find_cid(struct vmnapd *d, uint32_t cid);
/*
 * Hand a connection accepted from peer CID @cid to the VM registered with
 * it (what the AF_VSOCK listener does with each connection).  Takes @fd:
 * closed when no VM has @cid (-ENOENT, counted) or it has no link.
 */
int guest_link_vsock_route(struct vmnapd *d, int fd, uint32_t cid);

/*
 * Close @vm's hybrid listener (removing its socket file), unregister its
 * CID, close the daemon-wide listener when it was the last user.  The
 * session in vm->link is left alone.  NULL-safe, idempotent.
 */
void guest_link_listen_vm_detach(struct vm *vm);

/* Zeroes when @vm has no listener state. */
void guest_link_listen_get_stats(const struct vm *vm,
				 struct guest_link_listen_stats *st);
/* Zeroes when there is no daemon-wide state (no CID, not started). */
void guest_link_listen_vsock_get_stats(const struct vmnapd *d,
				       struct guest_link_vsock_stats *st);

#endif
