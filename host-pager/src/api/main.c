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
#include "events.h"	/* coordinator: event log */
#include "log.h"
#include "loop.h"
#include "mem_handshake.h"	/* pager: memory handshake */
#include "pager_debug.h"	/* pager: debug endpoint */
#include "vmnapd.h"
#include "vhost_vsock.h"
#include "version.h"

#define DEFAULT_RUN_DIR		"/run/vmnap"
#define DEFAULT_STORE_DIR	"/var/lib/vmnap"

/* --- vsock: --vsock NAME:VHOST_USER_SOCKET:GUEST_CID[:UDS] (vsock engineer) --- */
#define MAX_VSOCK_OPTS		64
#define OPT_VSOCK		0x100	/* long option only */

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
	while (d->vms)
		vm_free(d->vms);
	/* subsystems stop here, in reverse order of daemon_start() */
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
	bool log_level_set = false;		/* coordinator */

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
	log_info(NULL, "vmnapd %s ready (run dir %s, store dir %s)", VMNAPD_VERSION,
		 d.cfg.run_dir, d.cfg.store_dir);
	sd_notify(0, "READY=1");	/* coordinator: systemd Type=notify */
	err = loop_run(d.loop);
	sd_notify(0, "STOPPING=1");	/* coordinator */
	daemon_stop(&d);
	close(sfd);
	loop_free(d.loop);
	config_free(&settings);	/* coordinator */
	return err ? 1 : 0;
}
