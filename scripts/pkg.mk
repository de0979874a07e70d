# SPDX-License-Identifier: GPL-2.0-only
# Installing and packaging vmnap (README "Install").
#
#   make install [DESTDIR=] [PREFIX=/usr/local]   everything below
#   make install-host     vmnapd, vmnap-vsockd, vmnapctl, vmnap-gateway, the shim,
#                         units, config, man pages          (package vmnapd)
#   make install-dkms     the module's sources + dkms.conf   (vmnap-dkms)
#   make install-guest    vmnap-guest, modules-load.d, sysctl.d (vmnap-guest)
#   make man              build/man/*: man pages from each program's --help
#                         (help2man) and vmnap(4) from kmod/main.c
#   make deb              build/deb/*.deb with dpkg-buildpackage, lintian-checked
#
# The version comes from VERSION only: programs get it as VMNAP_VERSION,
# dkms.conf and the DKMS directory from here, debian/changelog must match
# (make deb and tests/pkg check).

VERSION		:= $(shell cat $(CURDIR)/VERSION)
PREFIX		?= /usr/local
SBINDIR		?= $(PREFIX)/sbin
LIBDIR		?= $(PREFIX)/lib
MANDIR		?= $(PREFIX)/share/man
DOCDIR		?= $(PREFIX)/share/doc
SYSCONFDIR	?= /etc
UNITDIR		?= $(PREFIX)/lib/systemd/system
DKMSDIR		?= /usr/src
INSTALL		?= install

VERSIONED_OBJS	:= $(BUILD)/host-pager/src/api/main.o $(BUILD)/host-pager/src/api/metrics.o \
		   $(BUILD)/host-pager/src/api/vsockd.o \
		   $(BUILD)/host-pager/tools/vmnapctl.o \
		   $(BUILD)/host-pager/gateway/main.o $(BUILD)/kmod/tools/vmnap-guest.o
$(VERSIONED_OBJS): VERSION
$(VERSIONED_OBJS): EXTRA_CFLAGS += -DVMNAP_VERSION='"$(VERSION)"'

HOST_PROGS	:= vmnapd vmnap-vsockd vmnapctl vmnap-gateway
# example set-ups (README "Operate"), installed under DOCDIR/vmnapd/examples/
EXAMPLES	:= $(sort $(wildcard examples/*/*))
MAN8		:= $(HOST_PROGS) vmnap-guest
MAN_PAGES	:= $(MAN8:%=$(BUILD)/man/%.8) $(BUILD)/man/vmnap.4

.PHONY: man install install-host install-dkms install-guest pkg-build deb

# What the packages need, without the tests or the module (DKMS builds it).
pkg-build: $(HOST_PROGS:%=$(BUILD)/%) $(BUILD)/libvmnap-preload.so \
	   $(BUILD)/vmnap-guest man

man: $(MAN_PAGES)

$(BUILD)/man/%.8: $(BUILD)/% man/%.h2m VERSION
	@mkdir -p $(dir $@)
	help2man -N -s 8 -i man/$*.h2m -o $@ $(CURDIR)/$<

$(BUILD)/man/vmnap.4: kmod/main.c man/vmnap.4.in VERSION scripts/man-module.py
	@mkdir -p $(dir $@)
	scripts/man-module.py kmod/main.c VERSION man/vmnap.4.in > $@.tmp && mv $@.tmp $@

install: install-host install-dkms install-guest

install-host: $(HOST_PROGS:%=$(BUILD)/%) $(BUILD)/libvmnap-preload.so $(MAN_PAGES)
	$(INSTALL) -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(LIBDIR)/vmnap \
		$(DESTDIR)$(UNITDIR) $(DESTDIR)$(MANDIR)/man8 \
		$(DESTDIR)$(DOCDIR)/vmnapd $(DESTDIR)$(SYSCONFDIR)/vmnap
	$(INSTALL) -m 0755 $(HOST_PROGS:%=$(BUILD)/%) $(DESTDIR)$(SBINDIR)/
	$(INSTALL) -m 0644 $(BUILD)/libvmnap-preload.so $(DESTDIR)$(LIBDIR)/vmnap/
	for u in host-pager/systemd/*.service; do \
		sed 's|/usr/local/sbin/|$(SBINDIR)/|g' $$u > $(DESTDIR)$(UNITDIR)/$${u##*/} && \
		chmod 0644 $(DESTDIR)$(UNITDIR)/$${u##*/} || exit 1; done
	$(INSTALL) -m 0644 $(HOST_PROGS:%=$(BUILD)/man/%.8) $(DESTDIR)$(MANDIR)/man8/
	$(INSTALL) -m 0644 host-pager/vmnapd.conf.example host-pager/gateway.env.example \
		README.md api/openapi.yaml $(DESTDIR)$(DOCDIR)/vmnapd/
	for f in $(EXAMPLES); do \
		$(INSTALL) -D -m 0644 $$f $(DESTDIR)$(DOCDIR)/vmnapd/$$f || exit 1; done
	@# the settings file the unit names: the defaults, never overwritten
	test -e $(DESTDIR)$(SYSCONFDIR)/vmnap/vmnapd.conf || \
		$(INSTALL) -m 0644 host-pager/vmnapd.conf.example $(DESTDIR)$(SYSCONFDIR)/vmnap/vmnapd.conf

# Exactly what Kbuild needs: its objects' sources, the headers they include
# (kmod/*.h, kmod/core/*.h, uapi/*.h), Kbuild itself and dkms.conf.
DKMS_SRCS	:= Kbuild $(wildcard kmod/*.c kmod/*.h) \
		   $(filter-out %_kunit.c,$(wildcard kmod/core/*.c)) $(wildcard kmod/core/*.h) \
		   $(wildcard uapi/*.h)

install-dkms:
	$(INSTALL) -d $(DESTDIR)$(DKMSDIR)/vmnap-$(VERSION)
	tar -cf - $(DKMS_SRCS) | tar -xf - -C $(DESTDIR)$(DKMSDIR)/vmnap-$(VERSION) --no-same-owner
	chmod -R u=rwX,go=rX $(DESTDIR)$(DKMSDIR)/vmnap-$(VERSION)
	sed 's/@VERSION@/$(VERSION)/' dkms.conf > $(DESTDIR)$(DKMSDIR)/vmnap-$(VERSION)/dkms.conf

install-guest: $(BUILD)/vmnap-guest $(BUILD)/man/vmnap-guest.8 $(BUILD)/man/vmnap.4
	$(INSTALL) -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(LIBDIR)/modules-load.d \
		$(DESTDIR)$(LIBDIR)/sysctl.d $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(MANDIR)/man4 \
		$(DESTDIR)$(DOCDIR)/vmnap-guest
	$(INSTALL) -m 0755 $(BUILD)/vmnap-guest $(DESTDIR)$(SBINDIR)/
	$(INSTALL) -m 0644 kmod/guest/modules-load.conf $(DESTDIR)$(LIBDIR)/modules-load.d/vmnap.conf
	$(INSTALL) -m 0644 kmod/guest/sysctl.conf $(DESTDIR)$(LIBDIR)/sysctl.d/60-vmnap.conf
	$(INSTALL) -m 0644 $(BUILD)/man/vmnap-guest.8 $(DESTDIR)$(MANDIR)/man8/
	$(INSTALL) -m 0644 $(BUILD)/man/vmnap.4 $(DESTDIR)$(MANDIR)/man4/
	$(INSTALL) -m 0644 kmod/guest/kernel-cmdline.txt $(DESTDIR)$(DOCDIR)/vmnap-guest/

# dpkg-buildpackage in a copy of the tree (build/deb/vmnap-VERSION): it
# writes its results to the parent directory and cleans with debian/rules,
# neither of which may touch this checkout.
DEB_STAGE	:= $(BUILD)/deb/vmnap-$(VERSION)
deb:
	@head -n1 debian/changelog | grep -q "($(VERSION))" || \
		{ echo "deb: debian/changelog's version is not VERSION ($(VERSION))" >&2; exit 1; }
	rm -rf $(BUILD)/deb && mkdir -p $(DEB_STAGE)
	@# the sources as git sees them (untracked ones too, ignored ones not);
	@# outside a git checkout, the tree without build outputs
	if git rev-parse --git-dir >/dev/null 2>&1; then \
		git ls-files -z -co --exclude-standard | \
			tar --null -T - --ignore-failed-read -cf -; \
	else \
		tar --exclude='./build*' --exclude='*.o' --exclude='*.ko' \
			--exclude='*.cmd' --exclude='*.mod' --exclude='*.mod.c' \
			--exclude=./.git -cf - .; \
	fi | tar -xf - -C $(DEB_STAGE)
	cd $(DEB_STAGE) && dpkg-buildpackage -b -us -uc -j2 >../dpkg-buildpackage.log 2>&1 || \
		{ tail -n 40 ../dpkg-buildpackage.log >&2; exit 1; }
	lintian --fail-on error,warning \
		$(BUILD)/deb/*.changes
	@ls $(BUILD)/deb/*.deb
