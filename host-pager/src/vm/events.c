// SPDX-License-Identifier: GPL-2.0-only
/* events.c - the JSONL event log; see events.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "events.h"
#include "log.h"
#include "loop.h"

struct events {
	int fd;			/* -1: not written */
	uint64_t written, failed;
};

int events_open(struct vmnapd *d, const char *path)
{
	struct events *ev = calloc(1, sizeof(*ev));

	if (!ev)
		return -ENOMEM;
	ev->fd = -1;
	if (path) {
		ev->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (ev->fd < 0) {
			int err = -errno;

			log_err(NULL, "cannot open event log %s: %s", path, strerror(-err));
			free(ev);
			return err;
		}
	}
	d->events = ev;
	return 0;
}

void events_close(struct vmnapd *d)
{
	struct events *ev = d->events;

	if (!ev)
		return;
	if (ev->fd >= 0)
		close(ev->fd);
	free(ev);
	d->events = NULL;
}

uint64_t events_emit(struct vmnapd *d, const char *vm, const char *type, json_t *fields)
{
	struct events *ev = d->events;
	json_t *o = json_is_object(fields) ? fields : json_object();
	uint64_t seq = ++d->event_seq;
	char *line;

	if (fields && o != fields)
		json_decref(fields);
	json_object_set_new(o, "seq", json_integer((json_int_t)seq));
	json_object_set_new(o, "t_ns", json_integer((json_int_t)now_ns()));
	json_object_set_new(o, "type", json_string(type));
	if (vm)
		json_object_set_new(o, "vm", json_string(vm));
	if (ev && ev->fd >= 0) {
		line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
		if (line) {
			size_t n = strnlen(line, EVENTS_LINE_MAX - 1);

			line[n] = '\n';	/* replaces the NUL (or cuts the line) */
			if (write(ev->fd, line, n + 1) == (ssize_t)(n + 1)) {
				ev->written++;
			} else {
				if (!ev->failed)
					log_warn(NULL, "event log write failed: %s", strerror(errno));
				ev->failed++;
			}
			free(line);
		} else {
			ev->failed++;
		}
	}
	json_decref(o);
	return seq;
}

void events_get_counts(struct vmnapd *d, uint64_t *written, uint64_t *failed)
{
	struct events *ev = d->events;

	*written = ev ? ev->written : 0;
	*failed = ev ? ev->failed : 0;
}
