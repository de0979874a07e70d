// SPDX-License-Identifier: GPL-2.0-only
/*
 * pause_chv.c - Cloud Hypervisor: PUT /api/v1/vm.pause and
 * PUT /api/v1/vm.resume on the API socket, no body; success is 204 (some
 * versions answer 200), an error a 4xx/5xx with a text or JSON body.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"
#include "pause.h"

#define HTTP_NO_CONTENT	204
#define HTTP_OK		200

static int chv_probe(struct pause_backend *pb)
{
	struct stat st;

	if (stat(pb->spec.path, &st) < 0)
		return -errno;
	return S_ISSOCK(st.st_mode) ? 0 : -ENOTSOCK;
}

static int chv_action(struct pause_backend *pb, const char *path)
{
	char reply[PAUSE_REPLY_MAX];
	long status = 0;
	int err;

	err = pause_http(pb, "PUT", path, NULL, &status, reply, sizeof(reply));
	if (err)
		return err;
	if (status == HTTP_NO_CONTENT || status == HTTP_OK)
		return 0;
	log_warn(pb->subject, "cloud-hypervisor PUT %s: HTTP %ld: %.200s", path, status, reply);
	return status >= 500 ? -EIO : -EINVAL;
}

static int chv_pause(struct pause_backend *pb)
{
	return chv_action(pb, "/api/v1/vm.pause");
}

static int chv_resume(struct pause_backend *pb)
{
	return chv_action(pb, "/api/v1/vm.resume");
}

const struct pause_backend_ops pause_chv_ops = {
	.name = "chv",
	.guest_clock_stops = true,
	.probe = chv_probe,
	.pause = chv_pause,
	.resume = chv_resume,
};
