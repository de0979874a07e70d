// SPDX-License-Identifier: GPL-2.0-only
/*
 * quiesce.c - hold and release the virtio block and network devices, and
 * the fail-safe timer that releases them when the host goes silent.
 *
 * Devices are found by walking the virtio bus (reached through an empty
 * virtio driver of our own: the bus symbol is not exported) and, below each
 * bound virtio-blk / virtio-net device, its gendisk or net_device child.
 *
 * Block: the request queue is frozen (blk_freeze_queue_start() on every
 * disk, then blk_mq_freeze_queue_wait_timeout()): new bios wait in
 * bio_queue_enter() and every request already issued completes before the
 * wait returns, so nothing is in flight and nothing new is dispatched.
 * Merely quiescing (blk_mq_quiesce_queue) would stop dispatch but leave
 * requests in flight and keep accepting new ones into the queues.
 *
 * Network: netif_device_detach() marks the device absent and stops every
 * TX queue, so the stack hands it no packet; packets already placed in
 * the TX virtqueue belong to the device.  RX is left alone (a paused VM
 * receives nothing anyway; a running one must not lose packets).
 *
 * Release is idempotent: each held device is released exactly once.
 *
 * Locking: the held devices (vq.qdevs, vq.nr_qdevs) have no lock of their
 * own: every caller of vmnap_quiesce(), vmnap_unquiesce() and
 * vmnap_quiesced_devices() holds the handoff lock (handoff.c), and
 * vmnap_quiesce_exit() runs at unload after the link, the netlink family
 * and the handoff are stopped.  The fail-safe hrtimer only queues its work
 * on vmnap_wq; a generation count (atomic) makes a fire from an earlier
 * arming harmless; the work calls the callback given at init, which takes
 * the handoff lock itself.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/blk-mq.h>
#include <linux/blkdev.h>
#include <linux/device.h>
#include <linux/netdevice.h>
#include <linux/rtnetlink.h>
#include <linux/slab.h>
#include <linux/virtio.h>
#include <linux/virtio_ids.h>

#include "compat.h"
#include "vmnap_mod.h"
#include "quiesce.h"

enum vmnap_qdev_kind {
	VMNAP_QDEV_BLK,
	VMNAP_QDEV_NET,
};

/**
 * struct vmnap_qdev - one held device
 * @kind: block or network
 * @dev: the gendisk's or net_device's struct device, referenced
 * @q: request queue (block)
 * @ndev: net device (network)
 */
struct vmnap_qdev {
	enum vmnap_qdev_kind kind;
	struct device *dev;
	struct request_queue *q;
	struct net_device *ndev;
};

/* Empty id table: binds nothing, only gives us the virtio bus. */
static const struct virtio_device_id vmnap_no_ids[] = { { 0 } };

static int vmnap_vdrv_probe(struct virtio_device *vdev)
{
	return -ENODEV;
}

static void vmnap_vdrv_remove(struct virtio_device *vdev)
{
}

static struct virtio_driver vmnap_vdrv = {
	.driver.name = "vmnap-bus-walker",
	.driver.owner = THIS_MODULE,
	.id_table = vmnap_no_ids,
	.probe = vmnap_vdrv_probe,
	.remove = vmnap_vdrv_remove,
};

/**
 * struct vmnap_quiesce - held devices and the fail-safe
 * @qdevs: held devices, [VMNAP_MAX_QUIESCE_DEVS]
 * @nr_qdevs: how many of @qdevs are held
 * @failsafe: fires failsafe_ms after the devices were held
 * @failsafe_work: runs @failsafe_expired on vmnap_wq
 * @failsafe_expired: given at init (handoff.c releases the devices)
 */
static struct vmnap_quiesce {
	struct vmnap_qdev *qdevs;
	unsigned int nr_qdevs;
	struct hrtimer failsafe;
	struct work_struct failsafe_work;
	void (*failsafe_expired)(void);
} vq;

static atomic_t vmnap_failsafe_gen = ATOMIC_INIT(0);
static atomic_t vmnap_failsafe_fired = ATOMIC_INIT(-1);

static bool vmnap_is_class(struct device *dev, const char *cls)
{
	return dev->class && dev->class->name && !strcmp(dev->class->name, cls);
}

/* Record one device below a virtio device, with a reference. */
static int vmnap_walk_child(struct device *child, void *data)
{
	u32 id = *(u32 *)data;
	struct vmnap_qdev *qd;

	if (vq.nr_qdevs == VMNAP_MAX_QUIESCE_DEVS)
		return -ENOSPC;
	qd = &vq.qdevs[vq.nr_qdevs];
	if (id == VIRTIO_ID_BLOCK && vmnap_is_class(child, "block") &&
	    child->type && child->type->name &&
	    !strcmp(child->type->name, "disk")) {
		struct gendisk *disk = dev_to_disk(child);

		if (!disk->queue)
			return 0;
		qd->kind = VMNAP_QDEV_BLK;
		qd->q = disk->queue;
	} else if (id == VIRTIO_ID_NET && vmnap_is_class(child, "net")) {
		qd->kind = VMNAP_QDEV_NET;
		qd->ndev = to_net_dev(child);
	} else {
		return 0;
	}
	qd->dev = get_device(child);
	vq.nr_qdevs++;
	return 0;
}

static int vmnap_walk_vdev(struct device *dev, void *data)
{
	struct virtio_device *vdev = dev_to_virtio(dev);
	u32 id = vdev->id.device;

	if (!dev->driver)
		return 0;	/* no driver bound: no disk or netdev below */
	if (id != VIRTIO_ID_BLOCK && id != VIRTIO_ID_NET)
		return 0;
	return device_for_each_child(dev, &id, vmnap_walk_child);
}

static void vmnap_put_devices(void)
{
	unsigned int i;

	for (i = 0; i < vq.nr_qdevs; i++)
		put_device(vq.qdevs[i].dev);
	vq.nr_qdevs = 0;
}

static void vmnap_release_dev(struct vmnap_qdev *qd)
{
	if (qd->kind == VMNAP_QDEV_BLK) {
		vmnap_blk_unfreeze(qd->q);
	} else {
		rtnl_lock();
		netif_device_attach(qd->ndev);
		rtnl_unlock();
	}
}

/*
 * Hold every virtio block and network device.  Returns 0 with all held, or
 * a negative errno with none held (a disk did not drain within
 * @timeout_ms, or too many devices).  Handoff lock held.
 */
int vmnap_quiesce(unsigned int timeout_ms)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(timeout_ms);
	unsigned int i;
	int ret;

	if (vq.nr_qdevs)
		return 0;	/* already held */
	ret = bus_for_each_dev(vmnap_vdrv.driver.bus, NULL, NULL,
			       vmnap_walk_vdev);
	if (ret) {
		pr_warn_ratelimited("virtio walk: %d\n", ret);
		vmnap_put_devices();
		return ret;
	}
	for (i = 0; i < vq.nr_qdevs; i++) {
		struct vmnap_qdev *qd = &vq.qdevs[i];

		if (qd->kind == VMNAP_QDEV_BLK) {
			blk_freeze_queue_start(qd->q);
			continue;
		}
		rtnl_lock();
		if (netif_device_present(qd->ndev)) {
			netif_device_detach(qd->ndev);
		} else {
			/* detached by someone else: not ours to attach */
			put_device(qd->dev);
			vq.qdevs[i--] = vq.qdevs[--vq.nr_qdevs];
		}
		rtnl_unlock();
	}
	for (i = 0; i < vq.nr_qdevs; i++) {
		struct vmnap_qdev *qd = &vq.qdevs[i];
		long left = (long)(deadline - jiffies);

		if (qd->kind != VMNAP_QDEV_BLK)
			continue;
		if (left <= 0 ||
		    !blk_mq_freeze_queue_wait_timeout(qd->q, left)) {
			pr_warn_ratelimited("%s did not drain in %u ms\n",
					    dev_name(qd->dev), timeout_ms);
			vmnap_unquiesce();
			return -ETIMEDOUT;
		}
	}
	return 0;
}

/* Release every held device; returns how many were held.  Idempotent. */
unsigned int vmnap_unquiesce(void)
{
	unsigned int i, n = vq.nr_qdevs;

	for (i = 0; i < n; i++)
		vmnap_release_dev(&vq.qdevs[i]);
	vmnap_put_devices();
	return n;
}

unsigned int vmnap_quiesced_devices(void)
{
	return vq.nr_qdevs;
}

/* ---- fail-safe -------------------------------------------------------- */

static enum hrtimer_restart vmnap_failsafe_fn(struct hrtimer *t)
{
	atomic_set(&vmnap_failsafe_fired, atomic_read(&vmnap_failsafe_gen));
	queue_work(vmnap_wq, &vq.failsafe_work);
	return HRTIMER_NORESTART;
}

static void vmnap_failsafe_work(struct work_struct *work)
{
	/* a fire from an earlier arming was invalidated by the cancel */
	if (atomic_read(&vmnap_failsafe_fired) != atomic_read(&vmnap_failsafe_gen))
		return;
	vq.failsafe_expired();
}

/* Arm for @ms of guest time (a paused guest sees none pass). */
void vmnap_failsafe_arm_ms(unsigned int ms)
{
	atomic_inc(&vmnap_failsafe_gen);
	hrtimer_start(&vq.failsafe, ms_to_ktime(max(ms, 1U)), HRTIMER_MODE_REL);
}

/* Arm for failsafe_ms. */
void vmnap_failsafe_arm(void)
{
	vmnap_failsafe_arm_ms(READ_ONCE(vmnap_failsafe_ms));
}

void vmnap_failsafe_cancel(void)
{
	hrtimer_cancel(&vq.failsafe);
	atomic_inc(&vmnap_failsafe_gen);
}

bool vmnap_is_own_timer(const struct hrtimer *t)
{
	return t == &vq.failsafe;
}

int vmnap_quiesce_init(void (*failsafe_expired)(void))
{
	int ret;

	vq.failsafe_expired = failsafe_expired;
	vq.qdevs = kcalloc(VMNAP_MAX_QUIESCE_DEVS, sizeof(*vq.qdevs),
			      GFP_KERNEL);
	if (!vq.qdevs)
		return -ENOMEM;
	vmnap_hrtimer_setup(&vq.failsafe, vmnap_failsafe_fn, CLOCK_MONOTONIC,
			    HRTIMER_MODE_REL);
	INIT_WORK(&vq.failsafe_work, vmnap_failsafe_work);
	ret = register_virtio_driver(&vmnap_vdrv);
	if (ret) {
		kfree(vq.qdevs);
		return ret;
	}
	return 0;
}

/* After the link is stopped and devices released (unload). */
void vmnap_quiesce_exit(void)
{
	hrtimer_cancel(&vq.failsafe);
	cancel_work_sync(&vq.failsafe_work);
	vmnap_unquiesce();
	unregister_virtio_driver(&vmnap_vdrv);
	kfree(vq.qdevs);
}
