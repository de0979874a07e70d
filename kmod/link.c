// SPDX-License-Identifier: GPL-2.0-only
/*
 * link.c - the vsock client: connect, reconnect with backoff, receive in a
 * work item, send.
 *
 * sk_data_ready and sk_state_change run in softirq context under the
 * socket lock; they only queue the receive work.  The receive work reads
 * with MSG_DONTWAIT until -EAGAIN, frames and validates every message
 * (core/proto.c, uapi/vmnap.h) and hands accepted ones up through the
 * struct vmnap_link_ops given at init (handoff.c).  EOF, a socket error (a
 * vsock transport reset sets ECONNRESET) or a fatal framing error drops
 * the link: ops->on_down() releases the devices, and a reconnect is
 * scheduled with capped exponential backoff.  While connected nothing is
 * scheduled: an idle link costs no wakeups.
 *
 * The doorbell: the host starts listening for the link at a time the guest
 * cannot know (the VM registered with vmnapd after boot, vmnapd
 * restarted), and a module waiting out its backoff would come up to
 * reconnect_max_ms late.  So the module also listens on guest port
 * VMNAP_DOORBELL_PORT; the host connects there when it starts listening.
 * Each connection is accepted and closed at once, nothing is read from it,
 * and if the link is down the connect work runs now with the backoff
 * reset.  The listener is set up by the connect work (a vsock transport
 * that appears after load is picked up by the next attempt) and kept
 * until stop; without it (port taken, no memory) the module reconnects by
 * backoff alone, as before.
 *
 * The socket is bound to a reserved local port (below 1024, as NFS and RPC
 * clients do) before connecting: only the kernel or a process with
 * CAP_NET_BIND_SERVICE can hold one, so the host refuses the guest link
 * from any other port and an unprivileged guest process cannot take over
 * the VM's session.
 *
 * Locking: the connect, receive, drop and doorbell work run on the ordered
 * vmnap_wq, never concurrently; they alone change the socket, the doorbell
 * socket, the receive buffer and the backoff (vmnap_link_reset_backoff()
 * is called from the receive work, and link stop runs with the workqueue
 * flushed).  vlink.tx_lock (mutex) serialises writers of the socket (the
 * receive work, the free page reporter, netlink test commands) and guards
 * vlink.sock, the sequence number and the connection number
 * (vmnap_link_gen()) for them; it is taken inside the handoff lock and
 * never held while calling the ops.  The socket callbacks run in softirq
 * context under sk_callback_lock and only queue the receive or doorbell
 * work.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kernel.h>
#include <linux/slab.h>
#include <linux/uio.h>
#include <linux/vm_sockets.h>
#include <net/sock.h>

#include "vmnap_mod.h"
#include "core/backoff.h"
#include "core/proto.h"
#include "link.h"

/* A blocked send (host not reading) gives up after this long. */
#define VMNAP_SEND_TIMEOUT_S	2

/*
 * Local ports tried for the client socket, highest first: reserved ports
 * (below 1024), which af_vsock lets only CAP_NET_BIND_SERVICE bind.  The
 * doorbell has the one above them.
 */
#define VMNAP_RESV_PORT_MAX	(VMNAP_DOORBELL_PORT - 1U)
#define VMNAP_RESV_PORT_MIN	512U
/* Doorbell connections queued at most, and accepted per work run. */
#define VMNAP_BELL_BACKLOG	4
#define VMNAP_BELL_ACCEPTS	16U

/**
 * struct vmnap_link - the connection (see the locking rules above)
 * @ops: the protocol above, given at init
 * @tx_lock: serialises senders; guards @sock and @tx_seq for them
 * @sock: the connected socket, or NULL
 * @tx_seq: sequence number of the last message sent
 * @gen: number of the current (or last) connection, under @tx_lock
 * @rx: bytes received and not yet framed
 * @connect_work: (re)connect, delayed by @backoff
 * @rx_work: receive and dispatch
 * @drop_work: drop the link as a transport reset would
 * @backoff: reconnect delay
 * @saved_data_ready: the socket's own callback, restored at close
 * @saved_state_change: the socket's own callback, restored at close
 * @bell: the doorbell's listening socket, or NULL
 * @bell_work: accept doorbell connections, connect now if down
 * @bell_saved_data_ready: the listener's own callback, restored at stop
 * @bell_warned: the listener's failure was logged once
 */
static struct vmnap_link {
	const struct vmnap_link_ops *ops;
	struct mutex tx_lock;
	struct socket *sock;
	u32 tx_seq;
	u64 gen;
	struct vmnap_rxbuf rx;
	struct delayed_work connect_work;
	struct work_struct rx_work;
	struct work_struct drop_work;
	struct vmnap_backoff backoff;
	void (*saved_data_ready)(struct sock *sk);
	void (*saved_state_change)(struct sock *sk);
	struct socket *bell;
	struct work_struct bell_work;
	void (*bell_saved_data_ready)(struct sock *sk);
	bool bell_warned;
} vlink;

static void vmnap_sk_data_ready(struct sock *sk)
{
	read_lock_bh(&sk->sk_callback_lock);
	if (sk->sk_user_data)
		queue_work(vmnap_wq, &vlink.rx_work);
	read_unlock_bh(&sk->sk_callback_lock);
}

static void vmnap_sk_state_change(struct sock *sk)
{
	read_lock_bh(&sk->sk_callback_lock);
	if (sk->sk_user_data)
		queue_work(vmnap_wq, &vlink.rx_work);
	read_unlock_bh(&sk->sk_callback_lock);
}

static void vmnap_sk_install(struct socket *sock)
{
	struct sock *sk = sock->sk;

	write_lock_bh(&sk->sk_callback_lock);
	vlink.saved_data_ready = sk->sk_data_ready;
	vlink.saved_state_change = sk->sk_state_change;
	sk->sk_user_data = &vlink;
	sk->sk_data_ready = vmnap_sk_data_ready;
	sk->sk_state_change = vmnap_sk_state_change;
	write_unlock_bh(&sk->sk_callback_lock);
}

static void vmnap_sk_restore(struct socket *sock)
{
	struct sock *sk = sock->sk;

	write_lock_bh(&sk->sk_callback_lock);
	sk->sk_user_data = NULL;
	sk->sk_data_ready = vlink.saved_data_ready;
	sk->sk_state_change = vlink.saved_state_change;
	write_unlock_bh(&sk->sk_callback_lock);
}

/* Send one whole message; serialised with other senders by tx_lock. */
static int vmnap_send_locked(const void *buf, size_t len)
{
	struct msghdr msg = { .msg_flags = MSG_NOSIGNAL };
	struct kvec iov = { .iov_base = (void *)buf, .iov_len = len };
	int ret;

	if (!vlink.sock)
		return -ENOTCONN;
	while (iov.iov_len) {
		ret = kernel_sendmsg(vlink.sock, &msg, &iov, 1, iov.iov_len);
		if (ret <= 0) {
			vmnap_count(VMNAP_CTR_TX_ERRORS);
			return ret ? ret : -EPIPE;
		}
		iov.iov_base = (u8 *)iov.iov_base + ret;
		iov.iov_len -= ret;
	}
	vmnap_count(VMNAP_CTR_TX_MSGS);
	return 0;
}

/* Stamp the sequence number into @buf (a built message) and send it. */
int vmnap_send(const void *buf, size_t len)
{
	struct vmnap_hdr *h = (struct vmnap_hdr *)buf;
	int ret;

	if (!len)
		return -EINVAL;
	mutex_lock(&vlink.tx_lock);
	h->seq = cpu_to_le32(++vlink.tx_seq);
	ret = vmnap_send_locked(buf, len);
	mutex_unlock(&vlink.tx_lock);
	return ret;
}

/*
 * Send @buf only on connection @gen (vmnap_link_gen() when the caller
 * decided to send).  -ENOTCONN: nothing of it went out (that connection is
 * gone).  Another -errno: some or all of it may have reached the host and
 * the stream may hold a partial message, so the link is dropped.
 */
int vmnap_send_gen(u64 gen, const void *buf, size_t len)
{
	struct vmnap_hdr *h = (struct vmnap_hdr *)buf;
	int ret;

	if (!len)
		return -EINVAL;
	mutex_lock(&vlink.tx_lock);
	if (!vlink.sock || vlink.gen != gen) {
		mutex_unlock(&vlink.tx_lock);
		return -ENOTCONN;
	}
	h->seq = cpu_to_le32(++vlink.tx_seq);
	ret = vmnap_send_locked(buf, len);
	if (ret) {
		if (ret == -ENOTCONN)
			ret = -EPIPE;
		queue_work(vmnap_wq, &vlink.drop_work);
	}
	mutex_unlock(&vlink.tx_lock);
	return ret;
}

/* Number of the current connection (or of the last one, while down). */
u64 vmnap_link_gen(void)
{
	u64 gen;

	mutex_lock(&vlink.tx_lock);
	gen = vlink.gen;
	mutex_unlock(&vlink.tx_lock);
	return gen;
}

int vmnap_send_error(u32 code, u32 ref_seq, const char *text)
{
	u8 buf[sizeof(struct vmnap_hdr) + sizeof(struct vmnap_error)];

	return vmnap_send(buf, vmnap_build_error(buf, sizeof(buf), 0, code,
						 ref_seq, text));
}

static void vmnap_schedule_connect(void)
{
	u32 ms = vmnap_backoff_next(&vlink.backoff);

	if (!vmnap_stopping())
		queue_delayed_work(vmnap_wq, &vlink.connect_work,
				   msecs_to_jiffies(ms));
}

/* Tear the socket down; called on the workqueue or at stop. */
static void vmnap_close(void)
{
	struct socket *sock;

	mutex_lock(&vlink.tx_lock);
	sock = vlink.sock;
	vlink.sock = NULL;
	mutex_unlock(&vlink.tx_lock);
	if (!sock)
		return;
	vmnap_sk_restore(sock);
	kernel_sock_shutdown(sock, SHUT_RDWR);
	sock_release(sock);
	vlink.rx.len = 0;
}

/* The connection is gone or untrustworthy: release and reconnect. */
static void vmnap_lost(void)
{
	bool had = vlink.sock != NULL;

	vmnap_close();
	if (!had)
		return;
	vmnap_count(VMNAP_CTR_LINK_LOSSES);
	vlink.ops->on_down();
	vmnap_schedule_connect();
}

/*
 * Bind @sock to the highest free reserved port.  -EADDRNOTAVAIL when all
 * are taken, another -errno when binding fails otherwise.
 */
static int vmnap_bind_reserved(struct socket *sock)
{
	struct sockaddr_vm local = {
		.svm_family = AF_VSOCK,
		.svm_cid = VMADDR_CID_ANY,
	};
	unsigned int port;
	int ret;

	for (port = VMNAP_RESV_PORT_MAX; port >= VMNAP_RESV_PORT_MIN; port--) {
		local.svm_port = port;
		ret = kernel_bind(sock, (struct sockaddr *)&local,
				  sizeof(local));
		if (ret != -EADDRINUSE)
			return ret;
	}
	return -EADDRNOTAVAIL;
}

/* ---- the doorbell ---- */

/* A connection waits on the doorbell (softirq or the transport's work). */
static void vmnap_bell_data_ready(struct sock *sk)
{
	read_lock_bh(&sk->sk_callback_lock);
	if (sk->sk_user_data)
		queue_work(vmnap_wq, &vlink.bell_work);
	read_unlock_bh(&sk->sk_callback_lock);
}

/* Listen on the doorbell port unless already listening (workqueue). */
static void vmnap_bell_listen(void)
{
	struct sockaddr_vm addr = {
		.svm_family = AF_VSOCK,
		.svm_cid = VMADDR_CID_ANY,
		.svm_port = VMNAP_DOORBELL_PORT,
	};
	struct socket *sock;
	struct sock *sk;
	int ret;

	if (vlink.bell)
		return;
	ret = sock_create_kern(&init_net, AF_VSOCK, SOCK_STREAM, 0, &sock);
	if (ret)
		return;		/* no af_vsock yet: the connect fails too */
	ret = kernel_bind(sock, (struct sockaddr *)&addr, sizeof(addr));
	if (!ret)
		ret = kernel_listen(sock, VMNAP_BELL_BACKLOG);
	if (ret) {
		sock_release(sock);
		vmnap_count(VMNAP_CTR_DOORBELL_FAILS);
		if (!vlink.bell_warned)
			pr_warn("doorbell on port %u: %d; reconnecting by backoff alone\n",
				VMNAP_DOORBELL_PORT, ret);
		vlink.bell_warned = true;
		return;
	}
	sk = sock->sk;
	write_lock_bh(&sk->sk_callback_lock);
	vlink.bell_saved_data_ready = sk->sk_data_ready;
	sk->sk_user_data = &vlink;
	sk->sk_data_ready = vmnap_bell_data_ready;
	write_unlock_bh(&sk->sk_callback_lock);
	vlink.bell = sock;
	/* a connection may have been queued before the callback was set */
	queue_work(vmnap_wq, &vlink.bell_work);
}

/* Stop: no more callbacks once this returns. */
static void vmnap_bell_restore(void)
{
	struct sock *sk = vlink.bell->sk;

	write_lock_bh(&sk->sk_callback_lock);
	sk->sk_user_data = NULL;
	sk->sk_data_ready = vlink.bell_saved_data_ready;
	write_unlock_bh(&sk->sk_callback_lock);
}

static void vmnap_bell_work(struct work_struct *work)
{
	struct socket *conn;
	unsigned int n = 0;

	if (!vlink.bell)
		return;
	while (n < VMNAP_BELL_ACCEPTS &&
	       kernel_accept(vlink.bell, &conn, O_NONBLOCK) == 0) {
		sock_release(conn);	/* the ring is the connection itself */
		n++;
	}
	if (!n)
		return;
	vmnap_count_add(VMNAP_CTR_DOORBELL_RINGS, n);
	if (n == VMNAP_BELL_ACCEPTS)
		queue_work(vmnap_wq, &vlink.bell_work);	/* more may wait */
	/*
	 * On the ordered workqueue the connect work is not running now: it is
	 * pending (link down) or idle (link up, or stopping).
	 */
	if (vlink.sock || vmnap_stopping())
		return;
	pr_info("doorbell rung: connecting now\n");
	vmnap_backoff_reset(&vlink.backoff);
	mod_delayed_work(vmnap_wq, &vlink.connect_work, 0);
}

static void vmnap_connect_work(struct work_struct *work)
{
	struct sockaddr_vm addr = {
		.svm_family = AF_VSOCK,
		.svm_cid = vmnap_host_cid,
		.svm_port = vmnap_port,
	};
	struct socket *sock;
	int ret;

	if (vmnap_stopping() || vlink.sock)
		return;
	vmnap_bell_listen();
	ret = sock_create_kern(&init_net, AF_VSOCK, SOCK_STREAM, 0, &sock);
	if (ret) {
		/* af_vsock not loaded yet, or no memory: try again later */
		vmnap_count(VMNAP_CTR_CONNECT_FAILS);
		vmnap_schedule_connect();
		return;
	}
	sock_set_sndtimeo(sock->sk, VMNAP_SEND_TIMEOUT_S);
	ret = vmnap_bind_reserved(sock);
	if (ret) {
		sock_release(sock);
		vmnap_count(VMNAP_CTR_CONNECT_FAILS);
		if (ret == -EADDRNOTAVAIL) {
			vmnap_count(VMNAP_CTR_NO_RESV_PORT);
			pr_warn_ratelimited("no free reserved port in %u..%u, retrying\n",
					    VMNAP_RESV_PORT_MIN,
					    VMNAP_RESV_PORT_MAX);
		} else {
			pr_warn_ratelimited("bind a reserved port: %d, retrying\n",
					    ret);
		}
		vmnap_schedule_connect();
		return;
	}
	ret = kernel_connect(sock, (struct sockaddr *)&addr, sizeof(addr), 0);
	if (ret) {
		sock_release(sock);
		vmnap_count(VMNAP_CTR_CONNECT_FAILS);
		if (vlink.backoff.attempts == 0)
			pr_info("connect to cid %u port %u: %d, retrying\n",
				vmnap_host_cid, vmnap_port, ret);
		vmnap_schedule_connect();
		return;
	}
	vmnap_count(VMNAP_CTR_CONNECTS);
	vmnap_sk_install(sock);
	mutex_lock(&vlink.tx_lock);
	vlink.sock = sock;
	vlink.tx_seq = 0;
	vlink.gen++;
	mutex_unlock(&vlink.tx_lock);
	vlink.rx.len = 0;

	vlink.ops->on_up();
	pr_info("connected to cid %u port %u\n", vmnap_host_cid, vmnap_port);
	/* data (or a reset) may have arrived before the callbacks were set */
	queue_work(vmnap_wq, &vlink.rx_work);
}

/* Frame and dispatch whatever the buffer holds. */
static int vmnap_rx_dispatch(void)
{
	struct vmnap_rxmsg m;
	int ret;

	while ((ret = vmnap_rx_next(&vlink.rx, &m)) != 0) {
		if (ret < 0) {
			vmnap_count(VMNAP_CTR_RX_FATAL);
			pr_warn_ratelimited("host stream unframed: %s, dropping link\n",
					    vmnap_err_name(m.err));
			vmnap_send_error(m.err, 0, NULL);
			return -EPROTO;
		}
		if (m.err) {
			u32 ref = le32_to_cpu(((struct vmnap_hdr *)vlink.rx.buf)->seq);

			vmnap_count(VMNAP_CTR_RX_BAD);
			pr_warn_ratelimited("host message rejected: %s\n",
					    vmnap_err_name(m.err));
			vmnap_send_error(m.err, ref, NULL);
		} else {
			vmnap_count(VMNAP_CTR_RX_MSGS);
			ret = vlink.ops->on_msg(m.hdr, m.payload);
			if (ret)
				return ret;
		}
		vmnap_rx_consume(&vlink.rx, m.size);
	}
	return 0;
}

static void vmnap_rx_work(struct work_struct *work)
{
	struct msghdr msg = { .msg_flags = MSG_DONTWAIT };
	struct kvec iov;
	int ret;

	if (!vlink.sock)
		return;
	for (;;) {
		if (vlink.rx.len == vlink.rx.cap) {
			/* cannot happen: rx_next frames any full buffer */
			ret = -EPROTO;
			break;
		}
		iov.iov_base = vlink.rx.buf + vlink.rx.len;
		iov.iov_len = vlink.rx.cap - vlink.rx.len;
		ret = kernel_recvmsg(vlink.sock, &msg, &iov, 1, iov.iov_len,
				     MSG_DONTWAIT);
		if (ret == -EAGAIN)
			return;
		if (ret <= 0) {
			if (ret == 0)
				ret = -ECONNRESET;
			break;
		}
		vlink.rx.len += ret;
		ret = vmnap_rx_dispatch();
		if (ret)
			break;
		if (!vlink.sock)	/* dropped by a handler */
			return;
	}
	pr_info("link lost (%d)\n", ret);
	vmnap_lost();
}

/* Drop the link as a transport reset would (test hook, protocol errors). */
static void vmnap_drop_work(struct work_struct *work)
{
	if (vlink.sock) {
		pr_info("link dropped\n");
		vmnap_lost();
	}
}

void vmnap_link_drop(void)
{
	queue_work(vmnap_wq, &vlink.drop_work);
}

/* Drop the link and wait until it is dropped (netlink test command). */
void vmnap_link_drop_sync(void)
{
	vmnap_link_drop();
	flush_workqueue(vmnap_wq);
}

/* HELLO_ACK accepted: the next loss reconnects after the shortest delay. */
void vmnap_link_reset_backoff(void)
{
	vmnap_backoff_reset(&vlink.backoff);
}

int vmnap_link_init(const struct vmnap_link_ops *ops)
{
	vlink.ops = ops;
	mutex_init(&vlink.tx_lock);
	INIT_DELAYED_WORK(&vlink.connect_work, vmnap_connect_work);
	INIT_WORK(&vlink.rx_work, vmnap_rx_work);
	INIT_WORK(&vlink.drop_work, vmnap_drop_work);
	INIT_WORK(&vlink.bell_work, vmnap_bell_work);
	vmnap_backoff_init(&vlink.backoff, vmnap_reconnect_min_ms,
			   vmnap_reconnect_max_ms);
	vlink.rx.cap = VMNAP_MAX_MSG;
	vlink.rx.buf = kvmalloc(vlink.rx.cap, GFP_KERNEL);
	if (!vlink.rx.buf)
		return -ENOMEM;
	return 0;
}

void vmnap_link_start(void)
{
	queue_delayed_work(vmnap_wq, &vlink.connect_work, 0);
}

/*
 * Stop for unload (vmnap_stopping() is already true, so no work schedules
 * a new connect): socket closed with callbacks restored before the works
 * are flushed, so nothing re-queues them afterwards.
 */
void vmnap_link_stop(void)
{
	cancel_delayed_work_sync(&vlink.connect_work);
	flush_workqueue(vmnap_wq);
	/* only the (now idle) workqueue changes vlink.sock */
	if (vlink.sock)
		vmnap_sk_restore(vlink.sock);
	if (vlink.bell)
		vmnap_bell_restore();
	/* a receive or doorbell work queued before the restore runs to its end */
	flush_workqueue(vmnap_wq);
	vmnap_close();
	if (vlink.bell) {
		sock_release(vlink.bell);
		vlink.bell = NULL;
	}
	cancel_work_sync(&vlink.rx_work);
	cancel_work_sync(&vlink.drop_work);
	cancel_work_sync(&vlink.bell_work);
	vlink.ops->on_down();
}

void vmnap_link_exit(void)
{
	kvfree(vlink.rx.buf);
}
