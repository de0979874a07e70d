// SPDX-License-Identifier: GPL-2.0-only
/*
 * link_events.c - a VM's "link" events under a guest that reconnects in a
 * loop, through the real wiring (vm_control_attach, the VM's guest link,
 * the event log on the vmnapd loop).  Each session sends a HELLO whose
 * module version holds a newline and invalid UTF-8, then drops.  Checked:
 * the link-up event keeps every field with the version escaped; past the
 * VM's event budget events are suppressed and counted, and once the
 * budget refills a summary event says how many: every session's events
 * are accounted for, emitted or suppressed.  The sessions come as fast as
 * the link's reconnect limit lets them (about 15 s).  TAP.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "events.h"
#include "guest_link.h"
#include "log.h"
#include "loop.h"
#include "vm_control.h"
#include "vmnapd.h"
#include "tap.h"

#define SESSIONS	25		/* 50 events: over the budget of 32 */
#define TICK_NS		(50ull * 1000000ull)
#define GUARD_NS	(90ull * 1000000000ull)	/* a bound, not a measurement */
#define FORGED		"1\n[ 1.0] I vm other: up\xff"

static struct vmnapd d;
static struct vm *vm;
static char ev_path[64];
static struct loop_timer tick, guard;
static unsigned int sessions, refused;
static bool guard_fired, accounted;

static ssize_t sink_send(void *targ, const void *buf, size_t len)
{
	(void)targ;
	(void)buf;
	return (ssize_t)len;
}

static const struct guest_link_transport sink = { .send = sink_send };

static void send_hello(void)
{
	_Alignas(8) unsigned char buf[sizeof(struct vmnap_hdr) + sizeof(struct vmnap_hello) +
				      sizeof(struct vmnap_range)];
	struct vmnap_hdr *h = (void *)buf;
	struct vmnap_hello *m = (void *)(h + 1);
	uint32_t len = sizeof(*m) + sizeof(m->ranges[0]);

	memset(buf, 0, sizeof(buf));
	vmnap_hdr_init(h, VMNAP_HELLO, len, 1);
	m->min_version = vmnap_cpu16(VMNAP_PROTO_MIN);
	m->max_version = vmnap_cpu16(VMNAP_PROTO_MAX);
	m->nr_cpus = vmnap_cpu32(1);
	m->page_size = vmnap_cpu32(4096);
	m->nr_ranges = vmnap_cpu32(1);
	memcpy(m->module_version, FORGED, sizeof(FORGED) - 1);
	m->ranges[0].len = vmnap_cpu64(1ull << 30);
	guest_link_rx(vm->link, buf, sizeof(*h) + len);
}

/*
 * The link events written so far: @emitted from the link's callbacks
 * (up, or down with "err"), @summaries (down without "err"), and the sum
 * of their "suppressed" counts.  The first up event goes to @first_up.
 */
static void read_events(unsigned int *emitted, unsigned int *summaries, uint64_t *suppressed,
			json_t **first_up)
{
	char line[EVENTS_LINE_MAX + 2];
	FILE *f = fopen(ev_path, "r");

	*emitted = *summaries = 0;
	*suppressed = 0;
	while (f && fgets(line, sizeof(line), f)) {
		json_t *e = json_loads(line, 0, NULL);
		const char *type = json_string_value(json_object_get(e, "type"));
		const char *state = json_string_value(json_object_get(e, "state"));

		if (e && type && !strcmp(type, "link")) {
			*suppressed += (uint64_t)json_integer_value(json_object_get(e, "suppressed"));
			if (state && !strcmp(state, "down") && !json_object_get(e, "err"))
				(*summaries)++;
			else
				(*emitted)++;
			if (first_up && !*first_up && state && !strcmp(state, "up")) {
				*first_up = e;
				continue;
			}
		}
		json_decref(e);
	}
	if (f)
		fclose(f);
}

static void on_tick(struct loop *l, struct loop_timer *t, void *arg)
{
	unsigned int emitted, summaries;
	uint64_t suppressed;

	(void)arg;
	if (sessions < SESSIONS) {
		int r = guest_link_connect(vm->link, &sink, NULL);

		if (r == 0) {
			send_hello();
			guest_link_transport_closed(vm->link, -ECONNRESET);
			sessions++;
		} else if (r == -EAGAIN) {
			refused++;
		} else {
			tap_bail("guest_link_connect: %s", strerror(-r));
			exit(1);
		}
	} else {
		read_events(&emitted, &summaries, &suppressed, NULL);
		if (emitted + suppressed == 2 * SESSIONS && summaries) {
			accounted = true;
			loop_stop(l);
			return;
		}
	}
	loop_timer_arm(l, t, TICK_NS);
}

static void on_guard(struct loop *l, struct loop_timer *t, void *arg)
{
	(void)t;
	(void)arg;
	guard_fired = true;
	loop_stop(l);
}

int main(void)
{
	char dir[] = "/tmp/vmnap-linkev-XXXXXX", err[256] = "";
	struct vm_control_spec spec = { .link_kind = VM_LINK_NONE };
	unsigned int emitted, summaries;
	uint64_t suppressed;
	json_t *up = NULL;
	const char *module;

	log_set_level(LOG_ERR);
	if (!mkdtemp(dir))
		return 1;
	snprintf(ev_path, sizeof(ev_path), "%s/events.jsonl", dir);
	d.loop = loop_new();
	if (!d.loop || events_open(&d, ev_path))
		return 1;
	vm = vm_new(&d, "web1");
	if (!vm || vm_control_attach(vm, &spec, err, sizeof(err))) {
		tap_bail("vm_control_attach: %s", err);
		return 1;
	}
	loop_timer_init(&tick, on_tick, NULL);
	loop_timer_init(&guard, on_guard, NULL);
	loop_timer_arm(d.loop, &tick, 0);
	loop_timer_arm(d.loop, &guard, GUARD_NS);
	loop_run(d.loop);
	loop_timer_cancel(d.loop, &tick);
	loop_timer_cancel(d.loop, &guard);

	tap(sessions == SESSIONS, "%u sessions (%u connections refused by the reconnect limit)",
	    sessions, refused);
	tap(refused > 0, "the reconnect limit paced the storm");
	read_events(&emitted, &summaries, &suppressed, &up);
	tap(!guard_fired && accounted,
	    "every session's events accounted for: %u emitted + %llu suppressed = %u, "
	    "%u summary event(s)", emitted, (unsigned long long)suppressed, 2 * SESSIONS,
	    summaries);
	tap(emitted < 2 * SESSIONS && suppressed > 0, "past the budget, events were suppressed");
	tap(vm_control_events_suppressed(vm) == suppressed,
	    "the VM's events_suppressed counter (%llu) matches the summaries",
	    (unsigned long long)vm_control_events_suppressed(vm));
	module = json_string_value(json_object_get(up, "module"));
	tap(module && !strcmp(module, "1\\x0a[ 1.0] I vm other: up\\xff"),
	    "the link-up event carries the module version escaped: %s", module ? module : "(none)");
	tap(json_object_get(up, "state") && json_object_get(up, "features") &&
	    json_object_get(up, "seq"), "the link-up event has every field");
	json_decref(up);

	vm_free(vm);
	events_close(&d);
	loop_free(d.loop);
	unlink(ev_path);
	rmdir(dir);
	return tap_done();
}
