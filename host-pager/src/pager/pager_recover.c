// SPDX-License-Identifier: GPL-2.0-only
/*
 * pager_recover.c - a pager created over the store a previous vmnapd left
 * (it was killed or restarted while the VMM lived on; the shim handed the
 * same userfaultfd and memfd again).
 *
 * What is true after any crash, by the durability rule of store.h: a page
 * the memfd holds is the guest's page (a punch never happened, or a
 * restore completed); a page the memfd lacks is in the store when the map
 * says "stored" alone (its checksum with it), else it is zero: no entry,
 * or one marked RESIDENT, whose page the VMM discarded (a balloon) after
 * it came back.  So an interrupted offload rolls back by itself (its
 * unpunched pages are resident) and an interrupted restore is finished by
 * faults.  The entries of pages in the memfd, and of discarded ones, are
 * cleared and written before anything runs: the pager that adopts the
 * store counts every resident page as written, so the map holds exactly
 * the pages out.
 *
 * The previous vmnapd left the mappers' ranges registered (registration
 * belongs to the VMM's mm, not to the reader), and may have read fault
 * messages it never answered: their threads sleep until a wake.  A
 * recovered pager registers each mapper again (the same userfaultfd: a
 * no-op for the kernel) and wakes its ranges; a woken thread whose page is
 * still missing faults again and is served.
 */
#include <errno.h>
#include <linux/userfaultfd.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "log.h"
#include "pager_internal.h"

/* From @off: the next data extent of the memfd, [*@data_from, *@data_to)
 * (both @end when only a hole follows). */
static int memfd_extent(int fd, uint64_t off, uint64_t end, uint64_t *data_from,
			uint64_t *data_to)
{
	off_t data = lseek(fd, (off_t)off, SEEK_DATA), hole;

	if (data < 0) {
		if (errno != ENXIO)
			return -errno;
		*data_from = *data_to = end;	/* a hole to the end */
		return 0;
	}
	hole = lseek(fd, data, SEEK_HOLE);
	if (hole < 0)
		return -errno;
	*data_from = (uint64_t)data & ~(uint64_t)(PAGER_PAGE_SIZE - 1);
	*data_to = ((uint64_t)hole + PAGER_PAGE_SIZE - 1) & ~(uint64_t)(PAGER_PAGE_SIZE - 1);
	if (*data_from > end)
		*data_from = end;
	if (*data_to > end)
		*data_to = end;
	return 0;
}

int pager_recover(struct pager *p)
{
	bool cleared = false;
	int err;

	for (unsigned int i = 0; i < p->nr_regions; i++) {
		struct pager_region *r = &p->regions[i];
		uint64_t off = r->memfd_off, end = r->memfd_off + r->size;

		if (r->memfd < 0)
			continue;
		while (off < end) {
			uint64_t from = end, to = end;
			int err = memfd_extent(r->memfd, off, end, &from, &to);

			if (err) {
				log_err(p->subject, "recovery: memfd extents: %s", strerror(-err));
				return err;
			}
			/* [off, from) is a hole, [from, to) data */
			for (uint64_t o = off; o < to; o += PAGER_PAGE_SIZE) {
				uint64_t pg = r->first_page + (o - r->memfd_off) / PAGER_PAGE_SIZE;

				if (!store_slot_stored(&p->store, pg))
					continue;
				p->rec_store_pages++;
				if (o < from && !store_slot_resident(&p->store, pg)) {
					pg_set(p, pg, PAGE_OFFLOADED);
					p->rec_offloaded++;
					continue;
				}
				if (o < from)
					p->rec_discarded++;	/* zero: a hole */
				else
					p->rec_resident++;
				store_slot_clear(&p->store, pg);
				cleared = true;
			}
			off = to > off ? to : end;
		}
	}
	err = cleared ? store_slots_write(&p->store, 0, p->npages) : 0;
	if (err)	/* the map in memory is right; a later crash may not be */
		log_warn(p->subject, "recovery: slot map of resident pages: %s",
			 strerror(-err));
	p->recovered = true;
	/* register mappers as they come, like an offloaded VM's */
	p->registered = true;
	log_info(p->subject, "recovered store %s (id %s): %llu page(s) in the store map, "
		 "%llu offloaded, %llu resident in the memfd (interrupted offload or "
		 "restore, or clean), %llu discarded by the VMM since they came back "
		 "(zero)", p->store.path, p->store.id,
		 (unsigned long long)p->rec_store_pages,
		 (unsigned long long)p->rec_offloaded,
		 (unsigned long long)p->rec_resident,
		 (unsigned long long)p->rec_discarded);
	return 0;
}

void pager_recover_wake(struct pager *p, struct pager_mapper *m)
{
	unsigned int woken = 0;

	for (unsigned int i = 0; i < p->nr_regions; i++) {
		struct uffdio_range rg = { .start = m->host_addr[i], .len = p->regions[i].size };

		if (m->host_addr[i] && !ioctl(m->uffd, UFFDIO_WAKE, &rg))
			woken++;
	}
	pager_maybe_unregister(p);	/* nothing out: no fault cost */
	log_info(p->subject, "recovered mapper pid %d: %u range(s) woken", (int)m->pid, woken);
}
