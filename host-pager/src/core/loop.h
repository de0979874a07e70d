/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * loop.h - vmnapd's event loop: epoll for fds, a short list for timers.
 *
 * One thread runs the loop; every callback runs on it and must not block.
 * Work that blocks (fault service reading the store) runs on its own
 * threads and reports back through an fd (eventfd) watched here.
 */
#ifndef VMNAP_LOOP_H
#define VMNAP_LOOP_H

#include <stdbool.h>
#include <stdint.h>

struct loop;

typedef void (*loop_fd_cb)(struct loop *l, int fd, uint32_t events, void *arg);

struct loop_timer;
typedef void (*loop_timer_cb)(struct loop *l, struct loop_timer *t, void *arg);

/* Embedded in the owner's struct; zero-initialise, then loop_timer_init. */
struct loop_timer {
	struct loop_timer *next;	/* armed timers, sorted by deadline */
	uint64_t deadline_ns;		/* CLOCK_MONOTONIC */
	loop_timer_cb cb;
	void *arg;
	const char *name;		/* for the slow-callback log */
	bool armed;
};

/*
 * A callback that runs longer than LOOP_SLOW_NS is logged with its name
 * (the callback function's, from the macros below) and counted: every
 * other fd and timer waited that long.
 */
#define LOOP_SLOW_NS	10000000ull	/* 10 ms */

struct loop *loop_new(void);
void loop_free(struct loop *l);

/* Watch @fd for EPOLL* @events; one registration per fd.  -errno.
 * loop_add_fd() names the registration "<file>:<cb>". */
int loop_add_fd_named(struct loop *l, int fd, uint32_t events, loop_fd_cb cb, void *arg,
		      const char *name);
#define loop_add_fd(l, fd, events, cb, arg) \
	loop_add_fd_named(l, fd, events, cb, arg, __FILE__ ":" #cb)
int loop_mod_fd(struct loop *l, int fd, uint32_t events);
/* Safe from inside any callback, including the fd's own. */
void loop_del_fd(struct loop *l, int fd);

void loop_timer_init_named(struct loop_timer *t, loop_timer_cb cb, void *arg, const char *name);
#define loop_timer_init(t, cb, arg) \
	loop_timer_init_named(t, cb, arg, __FILE__ ":" #cb)
/* (Re-)arm @t to fire once @delay_ns from now. */
void loop_timer_arm(struct loop *l, struct loop_timer *t, uint64_t delay_ns);
void loop_timer_arm_at(struct loop *l, struct loop_timer *t, uint64_t deadline_ns);
void loop_timer_cancel(struct loop *l, struct loop_timer *t);

/* Callbacks that ran longer than LOOP_SLOW_NS so far. */
uint64_t loop_slow_callbacks(const struct loop *l);

/* Run until loop_stop(); returns 0, or -errno if epoll itself failed. */
int loop_run(struct loop *l);
void loop_stop(struct loop *l);

uint64_t now_ns(void);		/* CLOCK_MONOTONIC in ns */

#endif
