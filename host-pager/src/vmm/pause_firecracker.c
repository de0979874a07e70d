// SPDX-License-Identifier: GPL-2.0-only
/*
 * pause_firecracker.c - Firecracker: PATCH /vm {"state": "Paused"} and
 * {"state": "Resumed"} on the API socket; success is 204 No Content, an
 * error a 4xx with {"fault_message": "..."}.
 */
#include <errno.h>
#include <jansson.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"
#include "pause.h"

#define HTTP_NO_CONTENT	204
#define HTTP_OK		200

static int fc_probe(struct pause_backend *pb)
{
	struct stat st;

	if (stat(pb->spec.path, &st) < 0)
		return -errno;
	return S_ISSOCK(st.st_mode) ? 0 : -ENOTSOCK;
}

static int fc_set_state(struct pause_backend *pb, const char *state)
{
	char body[64], reply[PAUSE_REPLY_MAX];
	long status = 0;
	int err;

	snprintf(body, sizeof(body), "{\"state\": \"%s\"}", state);
	err = pause_http(pb, "PATCH", "/vm", body, &status, reply, sizeof(reply));
	if (err)
		return err;
	if (status == HTTP_NO_CONTENT || status == HTTP_OK)
		return 0;
	{
		json_t *j = json_loads(reply, 0, NULL);
		const char *msg = j ? json_string_value(json_object_get(j, "fault_message")) : NULL;

		log_warn(pb->subject, "firecracker PATCH /vm %s: HTTP %ld: %.200s", state,
			 status, msg ? msg : "(no fault_message)");
		json_decref(j);
	}
	return status >= 500 ? -EIO : -EINVAL;
}

static int fc_pause(struct pause_backend *pb)
{
	return fc_set_state(pb, "Paused");
}

static int fc_resume(struct pause_backend *pb)
{
	return fc_set_state(pb, "Resumed");
}

const struct pause_backend_ops pause_firecracker_ops = {
	.name = "firecracker",
	.guest_clock_stops = false,
	.probe = fc_probe,
	.pause = fc_pause,
	.resume = fc_resume,
};
