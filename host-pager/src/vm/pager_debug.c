// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_debug.c - the pager's debug endpoint <run_dir>/pager-debug.sock
 * (0600): one command line in, one JSON line out, then the connection
 * closes.  For tests and introspection until the control API (coord/api)
 * drives the pager; it stays as a low-level tool.
 *
 *   list            every VM with a pager: page-state counts, bytes, faults
 *   stats NAME      the same for one VM
 *   offload NAME    offload now (the VM must be paused); answers when done
 *   resumed NAME    the VM runs again: start working-set prefetch
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "usock.h"
#include "loop.h"
#include "pager.h"
#include "pager_debug.h"
#include "views.h"

#define DEBUG_LINE_MAX	256

struct dbg_conn {
	struct dbg_conn *next;
	struct pager_debug *pd;
	int fd;
	size_t len;
	char line[DEBUG_LINE_MAX];
	bool waiting;		/* an offload answers later */
};

struct pager_debug {
	struct vmnapd *d;
	int fd;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct usock_id id;		/* the socket file we bound */
	struct dbg_conn *conns;
};

static void conn_free(struct dbg_conn *c)
{
	struct dbg_conn **pp;

	for (pp = &c->pd->conns; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	loop_del_fd(c->pd->d->loop, c->fd);
	close(c->fd);
	free(c);
}

/* Send @j (consumed) as one line and close. */
static void answer(struct dbg_conn *c, json_t *j)
{
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;

	if (s) {
		size_t n = strlen(s);

		s[n] = '\n';
		(void)send(c->fd, s, n + 1, MSG_NOSIGNAL);
		free(s);
	}
	json_decref(j);
	conn_free(c);
}

static void answer_error(struct dbg_conn *c, const char *msg)
{
	answer(c, json_pack("{s:b,s:s}", "ok", 0, "error", msg));
}

static void offload_done(struct pager *p, int err, void *arg)
{
	struct dbg_conn *c = arg;
	json_t *j = json_pack("{s:b,s:s,s:o}", "ok", !err, "error",
			      err ? strerror(-err) : "", "stats", pager_stats_json(p));

	answer(c, j);
}

static void run_command(struct dbg_conn *c)
{
	struct vmnapd *d = c->pd->d;
	char cmd[DEBUG_LINE_MAX], name[DEBUG_LINE_MAX];
	struct vm *vm;
	int n, err;

	n = sscanf(c->line, "%63s %63s", cmd, name);
	if (n >= 1 && !strcmp(cmd, "list")) {
		json_t *vms = json_array();

		for (vm = d->vms; vm; vm = vm->next) {
			json_t *o = vm->pager ? pager_stats_json(vm->pager) : json_object();

			json_object_set_new(o, "name", json_string(vm->name));
			json_object_set_new(o, "id", json_integer((json_int_t)vm->id));
			json_array_append_new(vms, o);
		}
		answer(c, json_pack("{s:b,s:o}", "ok", 1, "vms", vms));
		return;
	}
	if (n != 2) {
		answer_error(c, "usage: list | stats NAME | offload NAME | resumed NAME");
		return;
	}
	vm = vm_find(d, name);
	if (!vm || !vm->pager) {
		answer_error(c, "no such VM with guest RAM");
		return;
	}
	if (!strcmp(cmd, "stats")) {
		answer(c, json_pack("{s:b,s:o}", "ok", 1, "stats", pager_stats_json(vm->pager)));
	} else if (!strcmp(cmd, "resumed")) {
		pager_resumed(vm->pager);
		answer(c, json_pack("{s:b}", "ok", 1));
	} else if (!strcmp(cmd, "offload")) {
		log_info(vm->subject, "debug endpoint: offload");
		err = pager_offload_start(vm->pager, offload_done, c);
		if (err)
			answer_error(c, strerror(-err));
		else
			c->waiting = true;
	} else {
		answer_error(c, "unknown command");
	}
}

static void conn_readable(struct loop *l, int fd, uint32_t events, void *arg)
{
	struct dbg_conn *c = arg;
	ssize_t n;
	char *nl;

	(void)l;
	(void)events;
	if (c->waiting) {
		/* A hang-up while an offload runs: answer to nobody later. */
		char sink[64];

		n = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
		if (n == 0)
			loop_del_fd(c->pd->d->loop, fd);
		return;
	}
	n = recv(fd, c->line + c->len, sizeof(c->line) - 1 - c->len, MSG_DONTWAIT);
	if (n <= 0) {
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		conn_free(c);
		return;
	}
	c->len += (size_t)n;
	c->line[c->len] = 0;
	nl = strchr(c->line, '\n');
	if (!nl) {
		if (c->len >= sizeof(c->line) - 1)
			answer_error(c, "line too long");
		return;
	}
	*nl = 0;
	run_command(c);
}

static void on_accept(struct loop *l, int fd, uint32_t events, void *arg)
{
	struct pager_debug *pd = arg;
	struct dbg_conn *c;
	int cfd;

	(void)events;
	cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (cfd < 0)
		return;
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(cfd);
		return;
	}
	c->pd = pd;
	c->fd = cfd;
	c->next = pd->conns;
	pd->conns = c;
	if (loop_add_fd(l, cfd, EPOLLIN, conn_readable, c) < 0)
		conn_free(c);
}

int pager_debug_start(struct vmnapd *d)
{
	struct pager_debug *pd = calloc(1, sizeof(*pd));
	int n, err;

	if (!pd)
		return -ENOMEM;
	pd->d = d;
	n = snprintf(pd->path, sizeof(pd->path), "%s/%s", d->cfg.run_dir,
		     PAGER_DEBUG_SOCKET);
	if (n < 0 || (size_t)n >= sizeof(pd->path)) {
		free(pd);
		return -ENAMETOOLONG;
	}
	pd->fd = usock_listen(pd->path, 0600, SOMAXCONN, NULL, &pd->id);
	if (pd->fd < 0) {
		err = pd->fd;
		log_err(NULL, "pager debug socket %s: %s", pd->path,
			usock_listen_strerror(err));
		free(pd);
		return err;
	}
	err = loop_add_fd(d->loop, pd->fd, EPOLLIN, on_accept, pd);
	if (err < 0) {
		log_err(NULL, "pager debug socket %s: %s", pd->path, strerror(-err));
		close(pd->fd);
		usock_unlink(pd->path, &pd->id);
		free(pd);
		return err;
	}
	d->pager_debug = pd;
	return 0;
}

void pager_debug_stop(struct vmnapd *d)
{
	struct pager_debug *pd = d->pager_debug;

	if (!pd)
		return;
	while (pd->conns)
		conn_free(pd->conns);
	loop_del_fd(d->loop, pd->fd);
	close(pd->fd);
	usock_unlink(pd->path, &pd->id);
	free(pd);
	d->pager_debug = NULL;
}
