// SPDX-License-Identifier: GPL-2.0-only
/*
 * vsockd.c - vmnap-vsockd: one VM's vhost-user-vsock device in a process
 * of its own, so that it outlives vmnapd (QEMU 7.2 cannot reconnect a
 * vhost-user chardev: a device inside vmnapd dies with it for the VM's
 * lifetime).
 *
 *   LD_PRELOAD=libvmnap-preload.so VMNAP_VM=NAME VMNAP_SOCKET=RUN/mem.sock \
 *   vmnap-vsockd --vhost-user PATH --cid CID --uds UDS [-l LEVEL]
 *
 * It runs the same device as vmnapd's built-in one (vhost/vhost_vsock.c)
 * with two differences:
 *
 *   guest RAM   Each guest-RAM memfd of the front-end's memory table is
 *               mapped once, whole, from offset 0 (map_fd below), the way
 *               QEMU maps it.  The preload shim in this process
 *               (VMNAP_MEMFD_RECEIVED=1, set here) hands that mapping to
 *               vmnapd as one more mapper of the VM's guest RAM, with its
 *               own userfaultfd: a page vmnapd offloaded faults to vmnapd
 *               like a vCPU's access does, and waits while vmnapd is down
 *               (never a zero page), and the shim hands the mapping again
 *               to a restarted vmnapd.  Writes are tracked like QEMU's
 *               (write-protect on this mapping too).
 *   guest link  Not served here: the guest's connections to port 5151 are
 *               bridged like any port, to "<uds>_5151", where vmnapd
 *               listens for the VM ("link": {"hybrid": UDS}).  While
 *               vmnapd is down the guest's connection is refused (RST) and
 *               the module retries; a connection vmnapd had is closed when
 *               it dies, and the module reconnects.  Port 5151 still takes
 *               reserved source ports only (the device checks it).
 *
 * Everything else (host CONNECTs on "<uds>", "<uds>_P" listeners, stream
 * state) lives here and does not notice vmnapd come or go.  The process
 * ends when its front-end disconnects (QEMU exited: the guest is gone, and
 * its mapping of guest RAM must not keep the VM's pager alive) or on
 * SIGTERM/SIGINT.  Without the shim loaded it refuses to start: it would
 * read offloaded pages as zeros.
 */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "loop.h"
#include "version.h"
#include "vhost_vsock.h"

#define VSOCKD_SUBJECT		"vsockd"
#define VSOCKD_MAX_FILES	VHOST_USER_MAX_REGIONS

/* One guest-RAM file mapped whole; shared by all regions in it. */
struct ram_file {
	dev_t dev;
	ino_t ino;
	void *map;
	size_t size;
};

struct vsockd {
	struct loop *loop;
	struct ram_file files[VSOCKD_MAX_FILES];
	unsigned int nfiles;
	bool layout_set, linear;	/* VMNAP_GPA_LAYOUT decided, and to what */
};

/*
 * gpa == file offset in every region of the table: what the shim calls a
 * linear layout (VMNAP_GPA_BASE 0).  Checked over the whole table, not
 * per file: with more files than one it is "guessed", never wrong.
 */
static bool table_linear(const struct vhost_user_mem_region *t, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		if (t[i].guest_phys_addr != t[i].mmap_offset)
			return false;
	return n > 0;
}

static void *map_fd(void *opaque, int fd, uint64_t len,
		    const struct vhost_user_mem_region *t, unsigned int n)
{
	struct vsockd *v = opaque;
	struct ram_file *f;
	struct stat st;
	void *p;

	if (fstat(fd, &st) < 0)
		return NULL;
	for (unsigned int i = 0; i < v->nfiles; i++) {
		f = &v->files[i];
		if (f->dev == st.st_dev && f->ino == st.st_ino) {
			if (len <= f->size)
				return f->map;
			log_warn(VSOCKD_SUBJECT, "guest RAM file grew: refused");
			errno = ERANGE;
			return NULL;
		}
	}
	if (v->nfiles == VSOCKD_MAX_FILES || (uint64_t)st.st_size < len) {
		errno = v->nfiles == VSOCKD_MAX_FILES ? ENOSPC : ERANGE;
		return NULL;
	}
	/*
	 * The shim states the gpa of the handed mapping by VMNAP_GPA_LAYOUT.
	 * It is set once, before the first mapping (the shim's reconnect
	 * thread, which reads the environment, starts with it); a later
	 * table that breaks a "linear" claim is refused, never misstated.
	 */
	if (!v->layout_set) {
		v->linear = table_linear(t, n);
		if (v->linear)
			setenv("VMNAP_GPA_LAYOUT", "linear", 1);
		else
			unsetenv("VMNAP_GPA_LAYOUT");
		v->layout_set = true;
	} else if (v->linear && !table_linear(t, n)) {
		log_warn(VSOCKD_SUBJECT, "memory table no longer linear (gpa = offset): refused");
		errno = EINVAL;
		return NULL;
	}
	/* the shim hands this mapping to vmnapd before mmap returns */
	p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		log_err(VSOCKD_SUBJECT, "cannot map guest RAM (%lld bytes): %s",
			(long long)st.st_size, strerror(errno));
		return NULL;
	}
	f = &v->files[v->nfiles++];
	*f = (struct ram_file){ .dev = st.st_dev, .ino = st.st_ino, .map = p,
				.size = (size_t)st.st_size };
	log_info(VSOCKD_SUBJECT, "guest RAM mapped: %zu bytes, handed to vmnapd", f->size);
	return p;
}

static void disconnected(void *opaque)
{
	struct vsockd *v = opaque;

	log_info(VSOCKD_SUBJECT, "front-end gone: exiting (the guest is gone)");
	loop_stop(v->loop);
}

static void on_signal(struct loop *l, int fd, uint32_t events, void *arg)
{
	struct signalfd_siginfo si;

	(void)events;
	(void)arg;
	if (read(fd, &si, sizeof(si)) == sizeof(si))
		log_info(VSOCKD_SUBJECT, "signal %u: exiting", si.ssi_signo);
	loop_stop(l);
}

/* The preload shim interposes mmap: without it guest RAM is unmanaged. */
static bool shim_loaded(void)
{
	Dl_info info;
	void *sym = dlsym(RTLD_DEFAULT, "mmap");

	return sym && dladdr(sym, &info) && info.dli_fname &&
	       strstr(info.dli_fname, "vmnap-preload");
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: LD_PRELOAD=libvmnap-preload.so VMNAP_VM=NAME VMNAP_SOCKET=MEM_SOCK \\\n"
		"       vmnap-vsockd --vhost-user PATH --cid CID --uds UDS [-l LEVEL]\n"
		"One VM's vhost-user-vsock device for QEMU, in a process that outlives\n"
		"vmnapd restarts; started next to the VM's QEMU, it exits with it.\n\n"
		"  -u, --vhost-user PATH  socket QEMU's vhost-user-vsock-pci chardev connects to\n"
		"  -c, --cid CID          the guest's CID (3..2^32-2)\n"
		"  -s, --uds UDS          hybrid vsock socket: host CONNECTs on UDS, guest\n"
		"                         connections to host port P go to UDS_P (port 5151:\n"
		"                         vmnapd's guest link for the VM)\n"
		"  -l, --log-level LEVEL  err, warn, info (default) or debug\n"
		"  -h, --help             this text\n"
		"  -V, --version          print the version\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "vhost-user", required_argument, NULL, 'u' },
		{ "cid", required_argument, NULL, 'c' },
		{ "uds", required_argument, NULL, 's' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct vhost_vsock_config cfg = { 0 };
	struct vhost_vsock_ops ops = {
		.map_fd = map_fd, .disconnected = disconnected,
	};
	struct vhost_vsock *vs = NULL;
	struct vsockd v = { 0 };
	sigset_t mask;
	char *end;
	int c, sfd, err;

	while ((c = getopt_long(argc, argv, "u:c:s:l:hV", opts, NULL)) != -1) {
		switch (c) {
		case 'u': cfg.vhost_user_path = optarg; break;
		case 's': cfg.uds_path = optarg; break;
		case 'c':
			errno = 0;
			cfg.guest_cid = strtoull(optarg, &end, 10);
			if (errno || *end || cfg.guest_cid <= VSOCK_HOST_CID ||
			    cfg.guest_cid >= UINT32_MAX) {
				fprintf(stderr, "vmnap-vsockd: --cid: want 3..2^32-2\n");
				return 2;
			}
			break;
		case 'l':
			if (log_level_parse(optarg) < 0) {
				fprintf(stderr, "vmnap-vsockd: bad log level '%s'\n", optarg);
				return 2;
			}
			log_set_level((enum log_level)log_level_parse(optarg));
			break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("vmnap-vsockd %s\n", VMNAPD_VERSION); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc || !cfg.vhost_user_path || !cfg.uds_path || !cfg.guest_cid) {
		usage(stderr);
		return 2;
	}
	if (!shim_loaded()) {
		log_err(VSOCKD_SUBJECT, "libvmnap-preload.so is not loaded (LD_PRELOAD): "
			"guest RAM would be read unmanaged, offloaded pages as zeros");
		return 1;
	}
	setenv("VMNAP_MEMFD_RECEIVED", "1", 1);
	/* unmanaged guest RAM here would read offloaded pages as zeros */
	unsetenv("VMNAP_ALLOW_UNMANAGED");
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	v.loop = loop_new();
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (!v.loop || sfd < 0 || loop_add_fd(v.loop, sfd, EPOLLIN, on_signal, &v) < 0) {
		log_err(VSOCKD_SUBJECT, "cannot start the loop: %s", strerror(errno));
		return 1;
	}
	err = vhost_vsock_new(v.loop, VSOCKD_SUBJECT, &cfg, &ops, &v, &vs);
	if (err)
		return 1;
	log_info(VSOCKD_SUBJECT, "serving %s (pid %d)", cfg.vhost_user_path, (int)getpid());
	err = loop_run(v.loop);
	vhost_vsock_free(vs);
	/*
	 * Guest RAM stays mapped until exit: a munmap of a registered range
	 * waits until vmnapd reads its UNMAP event, and vmnapd may be down;
	 * the exit's teardown raises no event, and vmnapd sees the mapper go
	 * when the shim's connection closes.
	 */
	return err ? 1 : 0;
}
