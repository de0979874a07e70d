// SPDX-License-Identifier: GPL-2.0-only
/*
 * test_virtq - the device side of a split virtqueue against hostile ring
 * contents: loops, bad indices, buffers outside guest RAM, oversize and
 * misordered chains, an avail index that runs ahead; used ring and
 * notification suppression.  Guest RAM is a plain array here.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "virtq.h"

#define QSZ		8
#define RAM_SIZE	(64 * 1024)
#define BUF_GPA		0x1000		/* data buffers start here */

struct fixture {
	uint8_t ram[RAM_SIZE];
	struct vring_desc desc[QSZ];
	struct {
		uint16_t flags, idx, ring[QSZ];
	} avail;
	struct {
		uint16_t flags, idx;
		struct vring_used_elem ring[QSZ];
	} used;
	struct virtq vq;
	unsigned int maps;
	uint64_t again_gpa;	/* non-zero: this buffer is not accessible yet */
};

static int ram_map(void *ctx, uint64_t gpa, uint64_t len, void **addr)
{
	struct fixture *f = ctx;

	f->maps++;
	if (gpa >= RAM_SIZE || len > RAM_SIZE - gpa)
		return -EFAULT;
	*addr = f->ram + gpa;
	return f->again_gpa && gpa == f->again_gpa ? -EAGAIN : 0;
}

static int setup(void **state)
{
	static struct fixture f;
	struct virtq_mem mem = { .map = ram_map, .ctx = &f };

	memset(&f, 0, sizeof(f));
	assert_int_equal(virtq_setup(&f.vq, QSZ, f.desc, &f.avail, &f.used, 0, &mem), 0);
	*state = &f;
	return 0;
}

static void set_desc(struct fixture *f, unsigned int i, uint64_t gpa, uint32_t len,
		     uint16_t flags, uint16_t next)
{
	f->desc[i] = (struct vring_desc){ .addr = gpa, .len = len, .flags = flags, .next = next };
}

static void offer(struct fixture *f, uint16_t head)
{
	f->avail.ring[f->avail.idx % QSZ] = head;
	f->avail.idx++;
}

static void test_setup_rejects_bad_sizes(void **state)
{
	struct fixture *f = *state;
	struct virtq vq = { 0 };
	struct virtq_mem mem = { .map = ram_map, .ctx = f };

	assert_int_equal(virtq_setup(&vq, 0, f->desc, &f->avail, &f->used, 0, &mem), -EINVAL);
	assert_int_equal(virtq_setup(&vq, 6, f->desc, &f->avail, &f->used, 0, &mem), -EINVAL);
	assert_int_equal(virtq_setup(&vq, 65536, f->desc, &f->avail, &f->used, 0, &mem), -EINVAL);
	assert_int_equal(virtq_setup(&vq, 8, NULL, &f->avail, &f->used, 0, &mem), -EINVAL);
}

static void test_chain_out_then_in(void **state)
{
	struct fixture *f = *state;
	struct virtq_chain ch;
	char buf[16];

	memcpy(f->ram + BUF_GPA, "hello", 5);
	set_desc(f, 3, BUF_GPA, 5, VRING_DESC_F_NEXT, 5);
	set_desc(f, 5, BUF_GPA + 0x100, 4, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 6);
	set_desc(f, 6, BUF_GPA + 0x200, 4, VRING_DESC_F_WRITE, 0);
	offer(f, 3);
	assert_int_equal(virtq_avail_count(&f->vq), 1);
	assert_int_equal(virtq_pop(&f->vq, &ch), 1);
	assert_int_equal(ch.head, 3);
	assert_int_equal(ch.nout, 1);
	assert_int_equal(ch.nin, 2);
	assert_int_equal(ch.out_len, 5);
	assert_int_equal(ch.in_len, 8);
	assert_int_equal(virtq_chain_read(&ch, 0, buf, sizeof(buf)), 5);
	assert_memory_equal(buf, "hello", 5);
	/* a write spanning both writable buffers */
	assert_int_equal(virtq_chain_write(&ch, 2, "abcdef", 6), 6);
	assert_memory_equal(f->ram + BUF_GPA + 0x102, "ab", 2);
	assert_memory_equal(f->ram + BUF_GPA + 0x200, "cdef", 4);
	/* nothing beyond the chain */
	assert_int_equal(virtq_chain_write(&ch, 6, "xyz", 3), 2);
	virtq_push(&f->vq, ch.head, 8);
	assert_int_equal(f->used.idx, 1);
	assert_int_equal(f->used.ring[0].id, 3);
	assert_int_equal(f->used.ring[0].len, 8);
	assert_int_equal(virtq_pop(&f->vq, &ch), 0);
}

/*
 * Peek: the next chains' buffers, in order, without popping, mapping or
 * counting anything; a malformed chain (index out of range, indirect)
 * ends the walk with what came before it.
 */
static void test_peek(void **state)
{
	struct fixture *f = *state;
	struct virtq_chain ch;
	uint64_t gpa[8];
	uint32_t len[8];

	set_desc(f, 1, BUF_GPA, 100, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 2);
	set_desc(f, 2, BUF_GPA + 0x1000, 200, VRING_DESC_F_WRITE, 0);
	set_desc(f, 4, BUF_GPA + 0x2000, 300, VRING_DESC_F_WRITE, 0);
	set_desc(f, 5, BUF_GPA + 0x3000, 0, VRING_DESC_F_WRITE, 0);	/* empty: no range */
	offer(f, 1);
	offer(f, 4);
	offer(f, 5);
	assert_int_equal(virtq_peek(&f->vq, 8, gpa, len, 8), 3);
	assert_int_equal(gpa[0], BUF_GPA);
	assert_int_equal(len[0], 100);
	assert_int_equal(gpa[1], BUF_GPA + 0x1000);
	assert_int_equal(len[1], 200);
	assert_int_equal(gpa[2], BUF_GPA + 0x2000);
	assert_int_equal(len[2], 300);
	/* bounded by chains and by room */
	assert_int_equal(virtq_peek(&f->vq, 1, gpa, len, 8), 2);
	assert_int_equal(virtq_peek(&f->vq, 8, gpa, len, 1), 1);
	/* nothing popped, mapped or counted */
	assert_int_equal(f->maps, 0);
	assert_int_equal(f->vq.stats.chains, 0);
	assert_int_equal(virtq_avail_count(&f->vq), 3);
	assert_int_equal(virtq_pop(&f->vq, &ch), 1);
	assert_int_equal(ch.head, 1);
	/* after the pop, the walk starts at the next chain */
	assert_int_equal(virtq_peek(&f->vq, 8, gpa, len, 8), 1);
	assert_int_equal(gpa[0], BUF_GPA + 0x2000);
	/* a next index out of range ends it, and so does an indirect one */
	set_desc(f, 4, BUF_GPA + 0x2000, 300, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, QSZ + 3);
	assert_int_equal(virtq_peek(&f->vq, 8, gpa, len, 8), 1);
	set_desc(f, 4, BUF_GPA + 0x2000, 300, VRING_DESC_F_INDIRECT, 0);
	assert_int_equal(virtq_peek(&f->vq, 8, gpa, len, 8), 0);
	/* a head out of range too */
	f->avail.ring[(f->vq.last_avail_idx) % QSZ] = QSZ + 1;
	assert_int_equal(virtq_peek(&f->vq, 8, gpa, len, 8), 0);
	assert_int_equal(f->vq.stats.bad_head + f->vq.stats.bad_next + f->vq.stats.indirect, 0);
}

/* A buffer not accessible yet: the chain stays in the ring, uncounted;
 * validation still comes first (a bad chain with such a buffer is bad). */
static void test_not_yet_accessible_chain_stays(void **state)
{
	struct fixture *f = *state;
	struct virtq_chain ch;

	set_desc(f, 3, BUF_GPA, 5, VRING_DESC_F_NEXT, 5);
	set_desc(f, 5, BUF_GPA + 0x100, 4, VRING_DESC_F_WRITE, 0);
	offer(f, 3);
	f->again_gpa = BUF_GPA;
	assert_int_equal(virtq_pop(&f->vq, &ch), -EAGAIN);
	assert_int_equal(f->maps, 2);		/* the whole chain was walked */
	assert_int_equal(virtq_avail_count(&f->vq), 1);
	assert_int_equal(f->used.idx, 0);
	assert_int_equal(f->vq.stats.chains, 0);
	assert_int_equal(f->vq.stats.bad_addr, 0);
	f->again_gpa = 0;
	assert_int_equal(virtq_pop(&f->vq, &ch), 1);
	assert_int_equal(ch.head, 3);
	assert_int_equal(ch.in_len, 4);
	virtq_push(&f->vq, ch.head, 0);
	/* not accessible yet, then a descriptor outside guest RAM: malformed */
	set_desc(f, 1, BUF_GPA, 4, VRING_DESC_F_NEXT, 2);
	set_desc(f, 2, RAM_SIZE, 4, 0, 0);
	offer(f, 1);
	f->again_gpa = BUF_GPA;
	assert_int_equal(virtq_pop(&f->vq, &ch), -EINVAL);
	assert_int_equal(f->vq.stats.bad_addr, 1);
	assert_int_equal(f->used.idx, 2);
	assert_int_equal(virtq_pop(&f->vq, &ch), 0);
}

static void test_loop_is_rejected(void **state)
{
	struct fixture *f = *state;
	struct virtq_chain ch;

	set_desc(f, 0, BUF_GPA, 4, VRING_DESC_F_NEXT, 1);
	set_desc(f, 1, BUF_GPA, 4, VRING_DESC_F_NEXT, 0);
	offer(f, 0);
	assert_int_equal(virtq_pop(&f->vq, &ch), -EINVAL);
	assert_int_equal(f->vq.stats.loops, 1);
	/* handed back to the guest, length 0, ring moves on */
	assert_int_equal(f->used.idx, 1);
	assert_int_equal(f->used.ring[0].len, 0);
	assert_int_equal(virtq_pop(&f->vq, &ch), 0);
}

static void test_self_loop_is_rejected(void **state)
{
	struct fixture *f = *state;
	struct virtq_chain ch;

	set_desc(f, 2, BUF_GPA, 0, VRING_DESC_F_NEXT, 2);	/* zero length */
	offer(f, 2);
	assert_int_equal(virtq_pop(&f->vq, &ch), -EINVAL);
	assert_int_equal(f->vq.stats.loops, 1);
}

static void test_bad_indices(void **state)
{
	struct fixture *f = *state;
	struct virtq_chain ch;

	offer(f, QSZ);			/* head out of range */
	assert_int_equal(virtq_pop(&f->vq, &ch), -EINVAL);
	assert_int_equal(f->vq.stats.bad_head, 1);
	assert_int_equal(f->used.idx, 0);	/* cannot be handed back */
	set_desc(f, 1, BUF_GPA, 4, VRING_DESC_F_NEXT, 200);
	offer(f, 1);
	assert_int_equal(virtq_pop(&f->vq, &ch), -EINVAL);
	assert_int_equal(f->vq.stats.bad_next, 1);
}

static void test_outside_ram(void **state)
{
	struct fixture *f = *state;
	struct virtq_chain ch;

	set_desc(f, 0, RAM_SIZE - 2, 4, 0, 0);		/* straddles the end */
	offer(f, 0);
	assert_int_equal(virtq_pop(&f->vq, &ch), -EINVAL);
	set_desc(f, 0, UINT64_MAX - 1, 4, 0, 0);	/* wraps */
	offer(f, 0);
	assert_int_equal(virtq_pop(&f->vq, &ch), -EINVAL);
	assert_int_equal(f->vq.stats.bad_addr, 2);
}

static void test_oversize_and_order(void **state)
{
	struct fixture *f = *state;
	struct virtq_chain ch;

	set_desc(f, 0, 0, 1, VRING_DESC_F_NEXT, 1);
	set_desc(f, 1, 0, VIRTQ_CHAIN_BYTES_MAX, 0, 0);	/* checked before mapping */
	offer(f, 0);
	assert_int_equal(virtq_pop(&f->vq, &ch), -EINVAL);
	assert_int_equal(f->vq.stats.oversize, 1);
	set_desc(f, 0, BUF_GPA, 4, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 1);
	set_desc(f, 1, BUF_GPA, 4, 0, 0);	/* readable after writable */
	offer(f, 0);
	assert_int_equal(virtq_pop(&f->vq, &ch), -EINVAL);
	assert_int_equal(f->vq.stats.bad_order, 1);
	set_desc(f, 0, BUF_GPA, 16, VRING_DESC_F_INDIRECT, 0);
	offer(f, 0);
	assert_int_equal(virtq_pop(&f->vq, &ch), -EINVAL);
	assert_int_equal(f->vq.stats.indirect, 1);
}

static void test_avail_idx_runs_ahead(void **state)
{
	struct fixture *f = *state;
	struct virtq_chain ch;

	f->avail.idx = QSZ + 1;
	assert_int_equal(virtq_avail_count(&f->vq), 0);
	assert_true(f->vq.broken);
	assert_int_equal(virtq_pop(&f->vq, &ch), -EIO);
	assert_int_equal(f->vq.stats.bad_avail_idx, 1);
}

static void test_index_wraps(void **state)
{
	struct fixture *f = *state;
	struct virtq_mem mem = { .map = ram_map, .ctx = f };
	struct virtq_chain ch;

	/* resume at a base near the 16-bit wrap, as after GET/SET_VRING_BASE */
	f->avail.idx = 65534;
	f->used.idx = 65534;
	assert_int_equal(virtq_setup(&f->vq, QSZ, f->desc, &f->avail, &f->used, 65534, &mem), 0);
	set_desc(f, 0, BUF_GPA, 4, 0, 0);
	for (int i = 0; i < 4; i++)
		offer(f, 0);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(virtq_pop(&f->vq, &ch), 1);
		virtq_push(&f->vq, ch.head, 0);
	}
	assert_int_equal(f->vq.last_avail_idx, 2);
	assert_int_equal(f->used.idx, 2);
}

static void test_unpop_and_notify(void **state)
{
	struct fixture *f = *state;
	struct virtq_chain ch;

	set_desc(f, 4, BUF_GPA, 4, VRING_DESC_F_WRITE, 0);
	offer(f, 4);
	assert_int_equal(virtq_pop(&f->vq, &ch), 1);
	virtq_unpop(&f->vq);
	assert_int_equal(virtq_avail_count(&f->vq), 1);
	assert_false(virtq_should_notify(&f->vq));	/* nothing pushed */
	assert_int_equal(virtq_pop(&f->vq, &ch), 1);
	virtq_push(&f->vq, ch.head, 4);
	f->avail.flags = VRING_AVAIL_F_NO_INTERRUPT;
	assert_false(virtq_should_notify(&f->vq));
	offer(f, 4);
	assert_int_equal(virtq_pop(&f->vq, &ch), 1);
	virtq_push(&f->vq, ch.head, 4);
	f->avail.flags = 0;
	assert_true(virtq_should_notify(&f->vq));
	assert_false(virtq_should_notify(&f->vq));	/* once per batch */
}

static void test_long_chain_limit(void **state)
{
	struct fixture *f = *state;
	struct virtq_chain ch;

	/* every descriptor of the ring in one chain is legal */
	for (unsigned int i = 0; i < QSZ; i++)
		set_desc(f, i, BUF_GPA + i, 1, i + 1 < QSZ ? VRING_DESC_F_NEXT : 0,
			 (uint16_t)(i + 1));
	offer(f, 0);
	assert_int_equal(virtq_pop(&f->vq, &ch), 1);
	assert_int_equal(ch.nout, QSZ);
	assert_int_equal(f->vq.stats.loops, 0);
}

/* Random rings: whatever the guest writes, every segment stays in RAM. */
static void test_random_rings(void **state)
{
	struct fixture *f = *state;
	struct virtq_mem mem = { .map = ram_map, .ctx = f };
	uint64_t x = 0x243f6a8885a308d3ULL;
	struct virtq_chain ch;
	unsigned long popped = 0;

	for (int round = 0; round < 20000; round++) {
#define RND() (x ^= x << 13, x ^= x >> 7, x ^= x << 17, x)
		for (unsigned int i = 0; i < QSZ; i++) {
			/* mostly plausible fields, so that chains form; sometimes wild */
			f->desc[i].addr = RND() & 7 ? RND() % (RAM_SIZE + 0x100) : RND();
			f->desc[i].len = (uint32_t)(RND() & 7 ? RND() % 0x2000 : RND());
			f->desc[i].flags = (uint16_t)(RND() & 0xf ? RND() & 3 : RND());
			f->desc[i].next = (uint16_t)(RND() & 7 ? RND() % (QSZ + 1) : RND());
			f->avail.ring[i] = (uint16_t)(RND() & 7 ? RND() % (QSZ + 1) : RND());
		}
		f->avail.flags = (uint16_t)RND();
		f->avail.idx = (uint16_t)RND();
#undef RND
		if (x & 0xf000)		/* mostly a plausible avail index */
			f->avail.idx = (uint16_t)(x % (QSZ + 1));
		f->used.idx = 0;
		assert_int_equal(virtq_setup(&f->vq, QSZ, f->desc, &f->avail, &f->used, 0, &mem), 0);
		for (int k = 0; k < 2 * QSZ; k++) {
			int r = virtq_pop(&f->vq, &ch);

			if (r == 0 || r == -EIO)
				break;
			if (r < 0)
				continue;
			popped++;
			assert_true(ch.nout + ch.nin <= VIRTQ_CHAIN_MAX);
			for (unsigned int i = 0; i < ch.nout + ch.nin; i++) {
				const struct virtq_seg *sg = &ch.segs[i];

				assert_true((uint8_t *)sg->addr >= f->ram);
				assert_true((uint8_t *)sg->addr + sg->len <= f->ram + RAM_SIZE);
			}
			virtq_push(&f->vq, ch.head, 0);
		}
	}
	assert_true(popped > 1000);	/* valid chains did form */
	assert_true(f->vq.stats.loops + f->vq.stats.bad_addr + f->vq.stats.bad_next > 1000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_setup_rejects_bad_sizes, setup),
		cmocka_unit_test_setup(test_chain_out_then_in, setup),
		cmocka_unit_test_setup(test_peek, setup),
		cmocka_unit_test_setup(test_not_yet_accessible_chain_stays, setup),
		cmocka_unit_test_setup(test_loop_is_rejected, setup),
		cmocka_unit_test_setup(test_self_loop_is_rejected, setup),
		cmocka_unit_test_setup(test_bad_indices, setup),
		cmocka_unit_test_setup(test_outside_ram, setup),
		cmocka_unit_test_setup(test_oversize_and_order, setup),
		cmocka_unit_test_setup(test_avail_idx_runs_ahead, setup),
		cmocka_unit_test_setup(test_index_wraps, setup),
		cmocka_unit_test_setup(test_unpop_and_notify, setup),
		cmocka_unit_test_setup(test_long_chain_limit, setup),
		cmocka_unit_test_setup(test_random_rings, setup),
	};

	cmocka_set_message_output(CM_OUTPUT_TAP);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
