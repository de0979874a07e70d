// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_doorbell.c - ringing the guest module's doorbell (doorbell.c) on
 * the real vmnapd loop: a fake VMM's hybrid vsock socket "<uds>" reads the
 * CONNECT line and answers as Firecracker does (OK, a reset guest port,
 * garbage); a socket that is not there; a ring replaced by the next; a VM
 * freed with a ring in flight; AF_VSOCK as far as this host can go.
 * Tests wait for the ring's outcome, never for durations.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include "doorbell.h"
#include "log.h"
#include "loop.h"
#include "uapi/vmnap.h"
#include "usock.h"
#include "vmnapd.h"

/* Hang guard for loop-driven tests: a bound, not a measurement. */
#define GUARD_NS	(20ULL * 1000000000ULL)
/* How often the loop looks whether the ring has an outcome. */
#define POLL_NS		(1000000ULL)
#define VMM_READ_TIMEOUT_S	10

struct fx {
	struct loop *loop;
	struct vmnapd d;
	struct vm *vm;
	char dir[64];
	char uds[96];		/* the fake VMM's "<uds>" */
	int vmm_fd;		/* its listening socket */
	struct loop_timer poll, guard;
	bool guard_fired;
	uint64_t want;		/* outcomes to wait for */
};

static void on_guard(struct loop *l, struct loop_timer *t, void *arg)
{
	struct fx *f = arg;

	(void)t;
	f->guard_fired = true;
	loop_stop(l);
}

static uint64_t outcomes(const struct guest_doorbell_stats *st)
{
	return st->answered + st->refused + st->failed + st->timeouts;
}

static void on_poll(struct loop *l, struct loop_timer *t, void *arg)
{
	struct fx *f = arg;
	struct guest_doorbell_stats st;

	guest_doorbell_get_stats(f->vm, &st);
	if (outcomes(&st) >= f->want)
		loop_stop(l);
	else
		loop_timer_arm(l, t, POLL_NS);
}

/* Run the loop until @want rings have their outcome; a hang fails the test. */
static void run_until_outcomes(struct fx *f, uint64_t want)
{
	f->want = want;
	loop_timer_arm(f->loop, &f->guard, GUARD_NS);
	loop_timer_arm(f->loop, &f->poll, 0);
	assert_int_equal(loop_run(f->loop), 0);
	loop_timer_cancel(f->loop, &f->guard);
	loop_timer_cancel(f->loop, &f->poll);
	assert_false(f->guard_fired);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->loop = loop_new();
	assert_non_null(f->loop);
	f->d.loop = f->loop;
	f->d.cfg.run_dir = "/nonexistent";
	snprintf(f->dir, sizeof(f->dir), "/tmp/vmnap-doorbell-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->uds, sizeof(f->uds), "%s/fc.vsock", f->dir);
	f->vmm_fd = usock_listen(f->uds, 0600, 4, "test", NULL);
	assert_true(f->vmm_fd >= 0);
	f->vm = vm_new(&f->d, "t1");
	assert_non_null(f->vm);
	loop_timer_init(&f->guard, on_guard, f);
	loop_timer_init(&f->poll, on_poll, f);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[160];

	while (f->d.vms)
		vm_free(f->d.vms);
	close(f->vmm_fd);
	loop_free(f->loop);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

/* The fake VMM takes the ring's connection and checks its CONNECT line. */
static int vmm_accept_connect_line(struct fx *f)
{
	const struct timeval tv = { .tv_sec = VMM_READ_TIMEOUT_S };
	char want[32], line[32];
	ssize_t n;
	int fd;

	fd = accept(f->vmm_fd, NULL, NULL);
	assert_true(fd >= 0);
	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	snprintf(want, sizeof(want), "CONNECT %u\n", VMNAP_DOORBELL_PORT);
	n = recv(fd, line, sizeof(line) - 1, 0);
	assert_int_equal(n, (ssize_t)strlen(want));
	line[n] = '\0';
	assert_string_equal(line, want);
	return fd;
}

static void vmm_reply(int fd, const char *reply)
{
	assert_int_equal(write(fd, reply, strlen(reply)), (ssize_t)strlen(reply));
}

static struct guest_doorbell_stats stats(struct fx *f)
{
	struct guest_doorbell_stats st;

	guest_doorbell_get_stats(f->vm, &st);
	return st;
}

/* The guest accepted: the VMM says "OK <host port>". */
static void test_hybrid_answered(void **state)
{
	struct fx *f = *state;
	struct guest_doorbell_stats st;
	int fd;

	st = stats(f);
	assert_int_equal(st.rings, 0);
	assert_null(st.last);
	assert_int_equal(guest_doorbell_ring_hybrid(f->vm, f->uds), 0);
	fd = vmm_accept_connect_line(f);
	vmm_reply(fd, "OK 1073741824\n");
	run_until_outcomes(f, 1);
	st = stats(f);
	assert_int_equal(st.rings, 1);
	assert_int_equal(st.answered, 1);
	assert_string_equal(st.last, "answered");
	/* the ring hangs up: nothing else is sent */
	{
		char c;

		assert_int_equal(recv(fd, &c, 1, 0), 0);
	}
	close(fd);
}

/* Nothing listens on the guest port: Firecracker closes the stream. */
static void test_hybrid_refused(void **state)
{
	struct fx *f = *state;
	struct guest_doorbell_stats st;
	int fd;

	assert_int_equal(guest_doorbell_ring_hybrid(f->vm, f->uds), 0);
	fd = vmm_accept_connect_line(f);
	close(fd);
	run_until_outcomes(f, 1);
	st = stats(f);
	assert_int_equal(st.refused, 1);
	assert_int_equal(st.answered, 0);
	assert_string_equal(st.last, "refused");
}

/* A VMM that answers something else: failed, never answered. */
static void test_hybrid_bad_replies(void **state)
{
	static const char *const replies[] = {
		"NO\n",
		"OK",				/* then EOF: no newline */
		"OKAY 5\n",
		"0123456789012345678901234567890123456789\n",	/* too long */
	};
	struct fx *f = *state;
	struct guest_doorbell_stats st;

	for (unsigned int i = 0; i < sizeof(replies) / sizeof(replies[0]); i++) {
		int fd;

		assert_int_equal(guest_doorbell_ring_hybrid(f->vm, f->uds), 0);
		fd = vmm_accept_connect_line(f);
		vmm_reply(fd, replies[i]);
		shutdown(fd, SHUT_WR);
		run_until_outcomes(f, i + 1);
		close(fd);
		st = stats(f);
		assert_int_equal(st.failed, i + 1);
		assert_string_equal(st.last, "failed");
	}
	assert_int_equal(st.answered, 0);
	assert_int_equal(st.rings, sizeof(replies) / sizeof(replies[0]));
}

/* No socket at the path (VMM gone): -ENOENT, counted, no ring in flight. */
static void test_hybrid_no_socket(void **state)
{
	struct fx *f = *state;
	struct guest_doorbell_stats st;
	char path[128];

	snprintf(path, sizeof(path), "%s/gone.vsock", f->dir);
	assert_int_equal(guest_doorbell_ring_hybrid(f->vm, path), -ENOENT);
	st = stats(f);
	assert_int_equal(st.rings, 1);
	assert_int_equal(st.failed, 1);
	assert_int_equal(outcomes(&st), st.rings);
	assert_int_equal(guest_doorbell_ring_hybrid(f->vm, ""), -EINVAL);
	assert_int_equal(guest_doorbell_ring_hybrid(f->vm, NULL), -EINVAL);
}

/* A new ring drops the one in flight: its VMM stream is closed. */
static void test_hybrid_ring_replaces(void **state)
{
	struct fx *f = *state;
	struct guest_doorbell_stats st;
	int first, second;
	char c;

	assert_int_equal(guest_doorbell_ring_hybrid(f->vm, f->uds), 0);
	first = vmm_accept_connect_line(f);
	assert_int_equal(guest_doorbell_ring_hybrid(f->vm, f->uds), 0);
	second = vmm_accept_connect_line(f);
	assert_int_equal(recv(first, &c, 1, 0), 0);	/* dropped */
	vmm_reply(second, "OK 7\n");
	run_until_outcomes(f, 1);
	st = stats(f);
	assert_int_equal(st.rings, 2);
	assert_int_equal(st.answered, 1);
	assert_int_equal(outcomes(&st), 1);	/* the dropped one has none */
	close(first);
	close(second);
}

/* The VM goes away with a ring in flight: the stream closes, no leak. */
static void test_vm_freed_mid_ring(void **state)
{
	struct fx *f = *state;
	int fd;
	char c;

	assert_int_equal(guest_doorbell_ring_hybrid(f->vm, f->uds), 0);
	fd = vmm_accept_connect_line(f);
	vm_free(f->vm);
	f->vm = NULL;
	assert_int_equal(recv(fd, &c, 1, 0), 0);
	close(fd);
}

/*
 * AF_VSOCK: this host has no guest with CID 3 (and may have no vsock
 * transport at all): the ring ends, not answered, whatever the reason.
 */
static void test_vsock_unreachable(void **state)
{
	struct fx *f = *state;
	struct guest_doorbell_stats st;
	int ret = guest_doorbell_ring_vsock(f->vm, 3);

	if (!ret)
		run_until_outcomes(f, 1);
	st = stats(f);
	assert_int_equal(st.rings, 1);
	assert_int_equal(st.answered, 0);
	assert_int_equal(outcomes(&st), 1);
	assert_non_null(st.last);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_hybrid_answered, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hybrid_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hybrid_bad_replies, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hybrid_no_socket, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hybrid_ring_replaces, setup, teardown),
		cmocka_unit_test_setup_teardown(test_vm_freed_mid_ring, setup, teardown),
		cmocka_unit_test_setup_teardown(test_vsock_unreachable, setup, teardown),
	};

	log_set_level(LOG_ERR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
