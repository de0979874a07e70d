// SPDX-License-Identifier: GPL-2.0-only
/*
 * main.c - vmnapd: command line, directories, signals, the event loop.
 *
 * Subsystems start in daemon_start() and stop in daemon_stop(), in reverse.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "api.h"		/* coordinator: control API */
#include "config.h"	/* coordinator: settings file */
#include "pressure_watch.h"	/* memory pressure */
#include "events.h"	/* coordinator: event log */
#include "log.h"
#include "loop.h"
#include "mem_handshake.h"	/* pager: memory handshake */
#include "pager.h"		/* pager: reapers left at exit */
#include "pager_debug.h"	/* pager: debug endpoint */
#include "pause.h"		/* coordinator: backend calls left at exit */
#include "vmnapd.h"
#include "vhost_vsock.h"
#include "version.h"

#define DEFAULT_RUN_DIR		"/run/vmnap"
#define DEFAULT_STORE_DIR	"/var/lib/vmnap"

/* --- vsock: --vsock NAME:VHOST_USER_SOCKET:GUEST_CID[:UDS] (vsock engineer) --- */
#define MAX_VSOCK_OPTS		64
#define SHUTDOWN_VMM_WAIT_MS	2000	/* for VMM calls still in flight at exit */
#define OPT_VSOCK		0x100	/* long option only */
#define OPT_PRESSURE_CGROUP	0x101	/* long option only */

struct vsock_opt {
	char *spec;	/* strdup'ed, split in place */
};

/*
 * Create VM NAME (if new) with a vhost-user-vsock device: QEMU connects to
 * VHOST_USER_SOCKET; the hybrid socket UDS defaults to <run_dir>/NAME.vsock.
 */
static int vsock_opt_apply(struct vmnapd *d, char *spec)
{
	char *name = strtok(spec, ":"), *vu = strtok(NULL, ":");
	char *cid_s = strtok(NULL, ":"), *uds = strtok(NULL, ":"), *end;
	struct vhost_vsock_config cfg = { 0 };
	char uds_buf[256];
	struct vm *vm;
	int err;

	if (!name || !vu || !cid_s)
		return -EINVAL;
	cfg.guest_cid = strtoull(cid_s, &end, 10);
	if (*end)
		return -EINVAL;
	if (!uds) {
		snprintf(uds_buf, sizeof(uds_buf), "%s/%s.vsock", d->cfg.run_dir, name);
		uds = uds_buf;
	}
	cfg.vhost_user_path = vu;
	cfg.uds_path = uds;
	vm = vm_find(d, name);
	if (!vm)
		vm = vm_new(d, name);
	if (!vm)
		return -errno;
	err = vm_vsock_attach(vm, &cfg);
	if (err)
		log_err(vm->subject, "vsock device: %s", strerror(-err));
	return err;
}
/* --- end vsock --- */

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: vmnapd [OPTIONS]\n"
		"Reclaim the memory of paused VMs while their agents wait.\n\n"
		"  -r, --run-dir DIR     sockets (api.sock, mem.sock) [" DEFAULT_RUN_DIR "]\n"
		"  -s, --store-dir DIR   per-VM page stores [" DEFAULT_STORE_DIR "]\n"
		"  -e, --events FILE     append JSONL events to FILE\n"
		"  -c, --config FILE     read settings from FILE\n"
		"  -l, --log-level LVL   err, warn, info (default), debug\n"
		"      --pressure-cgroup DIR\n"
		"                        watch the memory pressure of the VMs' parent\n"
		"                        cgroup DIR (v2, or v1 memory controller)\n"
		"      --vsock NAME:VHOST_USER_SOCKET:GUEST_CID[:UDS]\n"
		"                        VM NAME gets a vhost-user-vsock device for QEMU\n"
		"                        (hybrid socket UDS, default RUN_DIR/NAME.vsock);\n"
		"                        repeatable\n"
		"  -h, --help            this text\n"
		"  -V, --version         print the version\n");
}

/* Create @path as a 0700 directory (or check an existing one). */
static int make_private_dir(const char *path)
{
	struct stat st;

	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return -errno;
	if (stat(path, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if ((st.st_mode & 077) && chmod(path, 0700) < 0)
		return -errno;
	return 0;
}

static void on_signal(struct loop *l, int fd, uint32_t events, void *arg)
{
	struct signalfd_siginfo si;

	(void)events;
	(void)arg;
	if (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		log_info(NULL, "signal %u: shutting down", si.ssi_signo);
	loop_stop(l);
}

/*
 * systemd's watchdog (WatchdogSec=): ping at half the interval from a loop
 * timer, so a loop stuck in a callback stops the pings and systemd
 * restarts vmnapd.
 */
struct watchdog {
	struct loop_timer timer;
	uint64_t interval_ns;
};

static void on_watchdog(struct loop *l, struct loop_timer *t, void *arg)
{
	struct watchdog *w = arg;

	sd_notify(0, "WATCHDOG=1");
	loop_timer_arm(l, t, w->interval_ns);
}

static void watchdog_start(struct loop *l, struct watchdog *w)
{
	uint64_t usec = 0;

	if (sd_watchdog_enabled(0, &usec) <= 0 || !usec)
		return;
	w->interval_ns = usec * 1000 / 2;
	loop_timer_init(&w->timer, on_watchdog, w);
	loop_timer_arm(l, &w->timer, w->interval_ns);
	log_info(NULL, "systemd watchdog: ping every %llu ms",
		 (unsigned long long)(w->interval_ns / 1000000));
}

static int daemon_start(struct vmnapd *d)
{
	int err;

	err = make_private_dir(d->cfg.run_dir);
	if (!err)
		err = make_private_dir(d->cfg.store_dir);
	if (err) {
		log_err(NULL, "cannot use %s or %s: %s", d->cfg.run_dir,
			d->cfg.store_dir, strerror(-err));
		return err;
	}
	/* subsystems start here */
	err = events_open(d, d->cfg.events_path);	/* coordinator */
	if (!err)
		err = api_start(d, NULL);	/* coordinator: <run_dir>/api.sock */
	if (err)
		return err;
	err = mem_handshake_start(d, NULL, NULL);	/* pager: <run_dir>/mem.sock */
	if (!err)
		err = pager_debug_start(d);	/* pager: <run_dir>/pager-debug.sock */
	if (err)
		return err;
	return 0;
}

static void daemon_stop(struct vmnapd *d)
{
	unsigned int left;

	while (d->vms)
		vm_free(d->vms);
	/* backend calls handed off by vm_free: a VM paused by one is resumed */
	left = pause_released_wait(SHUTDOWN_VMM_WAIT_MS);
	if (left)
		log_warn(NULL, "%u VMM call(s) still unanswered at exit", left);
	/* pagers handed to reapers by vm_free: their stores must be settled */
	left = pager_reapers_active();
	if (left)
		log_info(NULL, "waiting for %u pager(s) to detach", left);
	pager_reapers_wait();
	/* subsystems stop here, in reverse order of daemon_start() */
	pressure_watch_stop(d);	/* memory pressure */
	pager_debug_stop(d);	/* pager */
	mem_handshake_stop(d);	/* pager */
	api_stop(d);		/* coordinator */
	events_close(d);	/* coordinator */
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "run-dir", required_argument, NULL, 'r' },
		{ "store-dir", required_argument, NULL, 's' },
		{ "events", required_argument, NULL, 'e' },
		{ "config", required_argument, NULL, 'c' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ "vsock", required_argument, NULL, OPT_VSOCK },
		{ "pressure-cgroup", required_argument, NULL, OPT_PRESSURE_CGROUP },
		{ 0 }
	};
	struct vmnapd d = {
		.cfg = { .run_dir = DEFAULT_RUN_DIR, .store_dir = DEFAULT_STORE_DIR },
	};
	sigset_t mask;
	struct vsock_opt vsock_opts[MAX_VSOCK_OPTS];	/* vsock */
	unsigned int nvsock = 0;
	int c, sfd, err;
	struct vmnapd_settings settings;	/* coordinator */
	struct watchdog wd = { 0 };
	bool log_level_set = false;		/* coordinator */
	const char *pressure_cgroup = NULL;	/* memory pressure */

	while ((c = getopt_long(argc, argv, "r:s:e:c:l:hV", opts, NULL)) != -1) {
		switch (c) {
		case 'r': d.cfg.run_dir = optarg; break;
		case 's': d.cfg.store_dir = optarg; break;
		case 'e': d.cfg.events_path = optarg; break;
		case 'c': d.cfg.config_path = optarg; break;
		case 'l':
			if (log_level_parse(optarg) < 0) {
				fprintf(stderr, "vmnapd: unknown log level '%s'\n", optarg);
				return 2;
			}
			log_set_level((enum log_level)log_level_parse(optarg));
			log_level_set = true;	/* coordinator: wins over the file */
			break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("vmnapd %s\n", VMNAPD_VERSION); return 0;
		case OPT_PRESSURE_CGROUP:
			pressure_cgroup = optarg;
			break;
		case OPT_VSOCK:
			if (nvsock == MAX_VSOCK_OPTS) {
				fprintf(stderr, "vmnapd: too many --vsock\n");
				return 2;
			}
			vsock_opts[nvsock++].spec = strdup(optarg);
			break;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "vmnapd: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}

	/* --- coordinator: settings file; the command line wins --- */
	config_default(&settings);
	if (d.cfg.config_path) {
		char cerr[CONFIG_ERR_LEN];

		if (config_load(d.cfg.config_path, &settings, cerr, sizeof(cerr))) {
			fprintf(stderr, "vmnapd: %s\n", cerr);
			return 2;
		}
		if (!strcmp(d.cfg.run_dir, DEFAULT_RUN_DIR) && settings.run_dir)
			d.cfg.run_dir = settings.run_dir;
		if (!strcmp(d.cfg.store_dir, DEFAULT_STORE_DIR) && settings.store_dir)
			d.cfg.store_dir = settings.store_dir;
		if (!d.cfg.events_path)
			d.cfg.events_path = settings.events_path;
		if (!log_level_set && settings.log_level) {
			if (log_level_parse(settings.log_level) < 0) {
				fprintf(stderr, "vmnapd: %s: unknown log_level '%s'\n",
					d.cfg.config_path, settings.log_level);
				return 2;
			}
			log_set_level((enum log_level)log_level_parse(settings.log_level));
		}
	}
	d.settings = &settings;
	/* --- end coordinator --- */

	d.loop = loop_new();
	if (!d.loop) {
		log_err(NULL, "cannot create event loop: %s", strerror(errno));
		return 1;
	}
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);	/* a peer that hangs up is an EPIPE */
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0 || loop_add_fd(d.loop, sfd, EPOLLIN, on_signal, &d) < 0) {
		log_err(NULL, "cannot watch signals: %s", strerror(errno));
		return 1;
	}

	err = daemon_start(&d);
	if (err)
		return 1;
	for (unsigned int i = 0; i < nvsock; i++) {	/* vsock */
		if (!vsock_opts[i].spec || vsock_opt_apply(&d, vsock_opts[i].spec)) {
			fprintf(stderr, "vmnapd: bad --vsock '%s'\n",
				vsock_opts[i].spec ? vsock_opts[i].spec : "");
			daemon_stop(&d);
			return 2;
		}
		free(vsock_opts[i].spec);
	}
	/* memory pressure: the command line's cgroup, else the file's if enabled */
	if (!pressure_cgroup && settings.pressure_enabled)
		pressure_cgroup = settings.pressure_cgroup;
	if (pressure_cgroup) {
		err = pressure_watch_start(&d, pressure_cgroup, &settings.pressure);
		if (err) {
			log_err(NULL, "memory pressure cgroup %s: %s", pressure_cgroup,
				strerror(-err));
			daemon_stop(&d);
			return 1;
		}
	}
	log_info(NULL, "vmnapd %s ready (run dir %s, store dir %s)", VMNAPD_VERSION,
		 d.cfg.run_dir, d.cfg.store_dir);
	sd_notify(0, "READY=1");	/* coordinator: systemd Type=notify */
	watchdog_start(d.loop, &wd);
	err = loop_run(d.loop);
	sd_notify(0, "STOPPING=1");	/* coordinator */
	if (wd.interval_ns)
		loop_timer_cancel(d.loop, &wd.timer);
	daemon_stop(&d);
	close(sfd);
	loop_free(d.loop);
	config_free(&settings);	/* coordinator */
	return err ? 1 : 0;
}
