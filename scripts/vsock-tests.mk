# SPDX-License-Identifier: GPL-2.0-only
# Build details of the vhost-user-vsock tests (owner: vsock engineer).
#
# test_vhost_vsock observes the device's calls to the pager: the real
# pager_make_resident_async and pager_set_device_pages are wrapped at link
# time by the test's own.
$(BUILD)/tests/unit/test_vhost_vsock: LDFLAGS += -Wl,--wrap=pager_make_resident_async \
	-Wl,--wrap=pager_set_device_pages
