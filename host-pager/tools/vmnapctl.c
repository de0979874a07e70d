// SPDX-License-Identifier: GPL-2.0-only
/*
 * vmnapctl - command-line client of vmnapd's control API (api.h), over the
 * unix socket with libcurl.  One subcommand per endpoint; --json prints
 * the API's JSON as is, otherwise a short human-readable summary.
 *
 * Exit status: 0 success, 1 the API refused (4xx/5xx; its error message
 * on stderr), 2 usage error, 3 vmnapd unreachable (socket missing, refused,
 * timeout), 4 conflict (409: wrong state, exists), 5 not found (404).
 */
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef VMNAP_VERSION
#define VMNAP_VERSION	"unknown"	/* the build passes VERSION's */
#endif

#define DEFAULT_SOCKET		"/run/vmnap/api.sock"
#define CTL_TIMEOUT_MS		30000L
#define EXIT_API		1
#define EXIT_USAGE		2
#define EXIT_UNREACHABLE	3
#define EXIT_CONFLICT		4
#define EXIT_NOT_FOUND		5
#define HTTP_NOT_FOUND		404
#define HTTP_CONFLICT		409
#define HTTP_BAD_REQUEST	400

struct ctl {
	const char *socket;
	bool json;
};

struct buf {
	char *data;
	size_t len;
};

static size_t collect(char *p, size_t size, size_t n, void *arg)
{
	struct buf *b = arg;
	char *d = realloc(b->data, b->len + size * n + 1);

	if (!d)
		return 0;
	memcpy(d + b->len, p, size * n);
	b->data = d;
	b->len += size * n;
	b->data[b->len] = '\0';
	return size * n;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: vmnapctl [-s SOCKET] [--json] COMMAND [ARGS]\n"
		"Control vmnapd through its API socket (default " DEFAULT_SOCKET ").\n\n"
		"Commands:\n"
		"  status                          daemon status\n"
		"  host                            memory for admission (GET /host, JSON)\n"
		"  list                            every VM and its state\n"
		"  show VM                         one VM: state, counters, pager\n"
		"  register VM [--pause BACKEND:PATH] [--link unix:PATH|hybrid:UDS|vsock:CID]\n"
		"              [--vsock VHOST_USER:CID:UDS] [--managed]\n"
		"              [--policy JSON] [--allow-clock-stop]\n"
		"                                  register VM (BACKEND: qmp, freezer,\n"
		"                                  firecracker, chv; qmp and chv stop the\n"
		"                                  guest clock: managed only with\n"
		"                                  --allow-clock-stop)\n"
		"  set-pause VM BACKEND:PATH       set or replace VM's pause backend\n"
		"  delete VM                       unregister (resumes it first)\n"
		"  enable VM | disable VM          let the coordinator manage VM (or not)\n"
		"  policy VM JSON                  change coordinator settings of VM\n"
		"  wait-start VM ID [--kind model|network|file] [--confirm]\n"
		"  wait-ready VM ID                the response for wait ID arrived\n"
		"  delivered VM ID                 the guest took the response (--confirm waits)\n"
		"  event VM [SOURCE]               an external event for VM\n"
		"  pause VM | offload VM | resume VM   manual actions\n"
		"  metrics                         Prometheus metrics\n\n"
		"Options:\n"
		"  -s, --socket PATH   API socket (env VMNAP_API_SOCKET)\n"
		"  -j, --json          print the API's JSON reply\n"
		"  -h, --help          this text\n"
		"  -V, --version       print the version\n\n"
		"Exit status: 0 ok, 1 API error, 2 usage, 3 vmnapd unreachable,\n"
		"4 conflict (state, exists), 5 not found.\n");
}

/* One request; *@status HTTP status; @out body (caller frees).  Exit code. */
static int request(struct ctl *c, const char *method, const char *path, const char *body,
		   long *status, struct buf *out)
{
	struct curl_slist *hdrs = NULL;
	char url[512];
	CURLcode rc;
	CURL *curl = curl_easy_init();

	if (!curl)
		return EXIT_API;
	snprintf(url, sizeof(url), "http://localhost%s", path);
	hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
	curl_easy_setopt(curl, CURLOPT_UNIX_SOCKET_PATH, c->socket);
	curl_easy_setopt(curl, CURLOPT_URL, url);
	curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, CTL_TIMEOUT_MS);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, out);
	if (body) {
		curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	} else if (strcmp(method, "GET") && strcmp(method, "DELETE")) {
		curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, 0L);
	}
	rc = curl_easy_perform(curl);
	curl_slist_free_all(hdrs);
	if (rc != CURLE_OK) {
		fprintf(stderr, "vmnapctl: cannot reach vmnapd at %s: %s\n", c->socket,
			curl_easy_strerror(rc));
		curl_easy_cleanup(curl);
		return EXIT_UNREACHABLE;
	}
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, status);
	curl_easy_cleanup(curl);
	return 0;
}

static void print_vm_line(json_t *vm)
{
	json_t *ctr = json_object_get(vm, "counters");
	json_t *pager = json_object_get(vm, "pager");

	printf("%-20s %-11s %-9s waits %-3lld pauses %-4lld offloads %-4lld",
	       json_string_value(json_object_get(vm, "name")),
	       json_string_value(json_object_get(vm, "state")),
	       json_is_true(json_object_get(vm, "managed")) ? "managed" : "unmanaged",
	       (long long)json_integer_value(json_object_get(vm, "waits_outstanding")),
	       (long long)json_integer_value(json_object_get(ctr, "pauses")),
	       (long long)json_integer_value(json_object_get(ctr, "offloads")));
	if (pager)
		printf(" resident %.1f MiB",
		       (double)json_integer_value(json_object_get(pager, "resident_bytes")) /
		       (1024.0 * 1024.0));
	printf("\n");
}

/* Print the reply; map the status to an exit code. */
static int finish(struct ctl *c, long status, struct buf *b, const char *what)
{
	json_t *j = b->data ? json_loads(b->data, 0, NULL) : NULL;
	int ret = 0;

	if (status >= HTTP_BAD_REQUEST) {
		const char *msg = j ? json_string_value(json_object_get(j, "error")) : NULL;

		fprintf(stderr, "vmnapctl: %s: %s (HTTP %ld)\n", what, msg ? msg : "error", status);
		ret = status == HTTP_NOT_FOUND ? EXIT_NOT_FOUND :
		      status == HTTP_CONFLICT ? EXIT_CONFLICT : EXIT_API;
		if (c->json && b->data)
			fputs(b->data, stdout);
	} else if (c->json || !j) {
		if (b->data)
			fputs(b->data, stdout);
	} else if (json_is_array(json_object_get(j, "vms"))) {
		size_t i;
		json_t *vm;

		json_array_foreach(json_object_get(j, "vms"), i, vm)
			print_vm_line(vm);
	} else if (json_object_get(j, "counters")) {
		print_vm_line(j);
	} else {
		const char *key;
		json_t *v;

		json_object_foreach(j, key, v) {
			char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);

			printf("%s: %s\n", key, s ? s : "?");
			free(s);
		}
	}
	json_decref(j);
	free(b->data);
	return ret;
}

static int call(struct ctl *c, const char *method, const char *path, const char *body,
		const char *what)
{
	struct buf b = { 0 };
	long status = 0;
	int ret = request(c, method, path, body, &status, &b);

	if (ret) {
		free(b.data);
		return ret;
	}
	return finish(c, status, &b, what);
}

/* Build a JSON body with jansson so names and paths are escaped. */
static char *dump(json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT);

	json_decref(j);
	return s;
}

static int cmd_register(struct ctl *c, const char *vm, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "pause", required_argument, NULL, 'p' },
		{ "link-socket", required_argument, NULL, 'L' },
		{ "link", required_argument, NULL, 'l' },
		{ "vsock", required_argument, NULL, 'v' },
		{ "managed", no_argument, NULL, 'm' },
		{ "policy", required_argument, NULL, 'P' },
		{ "allow-clock-stop", no_argument, NULL, 'A' },
		{ 0 }
	};
	json_t *body = json_object();
	char path[256], *s;
	bool allow_clock_stop = false;
	int o, ret;

	optind = 1;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		char *colon;

		switch (o) {
		case 'p':
			colon = strchr(optarg, ':');
			if (!colon) {
				fprintf(stderr, "vmnapctl: --pause BACKEND:PATH\n");
				json_decref(body);
				return EXIT_USAGE;
			}
			*colon = '\0';
			json_object_set_new(body, "pause", json_pack("{s:s,s:s}", "backend", optarg,
								     "path", colon + 1));
			break;
		case 'L':
			json_object_set_new(body, "link_socket", json_string(optarg));
			break;
		case 'l': {
			char *colon = strchr(optarg, ':');

			if (colon)
				*colon = '\0';
			if (colon && !strcmp(optarg, "unix"))
				json_object_set_new(body, "link", json_pack("{s:s}", "unix", colon + 1));
			else if (colon && !strcmp(optarg, "hybrid"))
				json_object_set_new(body, "link", json_pack("{s:s}", "hybrid", colon + 1));
			else if (colon && !strcmp(optarg, "vsock"))
				json_object_set_new(body, "link", json_pack("{s:I}", "vsock_cid",
					(json_int_t)strtoll(colon + 1, NULL, 10)));
			else {
				fprintf(stderr, "vmnapctl: --link unix:PATH|hybrid:UDS|vsock:CID\n");
				json_decref(body);
				return EXIT_USAGE;
			}
			break;
		}
		case 'v': {
			char *vu = strtok(optarg, ":"), *cid = strtok(NULL, ":"), *uds = strtok(NULL, "");

			if (!vu || !cid || !uds) {
				fprintf(stderr, "vmnapctl: --vsock VHOST_USER:CID:UDS\n");
				json_decref(body);
				return EXIT_USAGE;
			}
			json_object_set_new(body, "vsock", json_pack("{s:s,s:I,s:s}", "vhost_user", vu,
				"cid", (json_int_t)strtoll(cid, NULL, 10), "uds", uds));
			break;
		}
		case 'm':
			json_object_set_new(body, "managed", json_true());
			break;
		case 'A':
			allow_clock_stop = true;
			break;
		case 'P': {
			json_t *p = json_loads(optarg, 0, NULL);

			if (!p) {
				fprintf(stderr, "vmnapctl: --policy: not JSON\n");
				json_decref(body);
				return EXIT_USAGE;
			}
			json_object_set_new(body, "policy", p);
			break;
		}
		default:
			json_decref(body);
			return EXIT_USAGE;
		}
	}
	if (allow_clock_stop && json_object_get(body, "pause"))
		json_object_set_new(json_object_get(body, "pause"), "allow_clock_stop", json_true());
	s = dump(body);
	snprintf(path, sizeof(path), "/vms/%s", vm);
	ret = call(c, "PUT", path, s, "register");
	free(s);
	return ret;
}

static bool vm_arg_ok(const char *vm)
{
	for (const char *p = vm; *p; p++)
		if (*p == '/' || *p == '?' || *p == '#' || *p == '%' || *p == ' ')
			return false;
	return *vm != '\0';
}

/* Commands taking a VM name (status, list, metrics and help take none). */
static bool known_command(const char *cmd)
{
	static const char *const cmds[] = {
		"register", "show", "delete", "enable", "disable", "policy",
		"set-pause", "wait-start", "wait-ready", "delivered", "event",
		"pause", "offload", "resume",
	};
	size_t i;

	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(cmd, cmds[i]))
			return true;
	return false;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 }
	};
	struct ctl c = { .socket = getenv("VMNAP_API_SOCKET") };
	const char *cmd, *vm = NULL;
	char path[512], *body = NULL;
	int o, ret, nargs;
	char **args;

	if (!c.socket)
		c.socket = DEFAULT_SOCKET;
	/* options before the command only: the command's own follow it */
	while ((o = getopt_long(argc, argv, "+s:jhV", opts, NULL)) != -1) {
		switch (o) {
		case 's': c.socket = optarg; break;
		case 'j': c.json = true; break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("vmnapctl %s\n", VMNAP_VERSION); return 0;
		default: usage(stderr); return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	cmd = argv[optind];
	args = argv + optind + 1;
	nargs = argc - optind - 1;
	if (!strcmp(cmd, "help")) {
		usage(stdout);
		return 0;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);

	if (!strcmp(cmd, "status") || !strcmp(cmd, "list") || !strcmp(cmd, "metrics") ||
	    !strcmp(cmd, "host")) {
		if (nargs) {
			usage(stderr);
			return EXIT_USAGE;
		}
		if (!strcmp(cmd, "metrics") || !strcmp(cmd, "host")) {
			bool j = c.json;

			c.json = true;	/* text or JSON: print as is */
			ret = call(&c, "GET", !strcmp(cmd, "host") ? "/host" : "/metrics", NULL, cmd);
			c.json = j;
			return ret;
		}
		return call(&c, "GET", !strcmp(cmd, "status") ? "/" : "/vms", NULL, cmd);
	}
	if (!known_command(cmd)) {
		fprintf(stderr, "vmnapctl: unknown command '%s' (vmnapctl --help lists them)\n",
			cmd);
		return EXIT_USAGE;
	}
	if (nargs < 1 || !vm_arg_ok(args[0])) {
		fprintf(stderr, "vmnapctl: %s: missing or bad VM name\n", cmd);
		return EXIT_USAGE;
	}
	vm = args[0];
	if (!strcmp(cmd, "register"))
		return cmd_register(&c, vm, nargs, args);

	if (!strcmp(cmd, "show") || !strcmp(cmd, "delete")) {
		snprintf(path, sizeof(path), "/vms/%s", vm);
		return call(&c, !strcmp(cmd, "show") ? "GET" : "DELETE", path, NULL, cmd);
	}
	if (!strcmp(cmd, "enable") || !strcmp(cmd, "disable") || !strcmp(cmd, "policy")) {
		json_t *j;

		if (!strcmp(cmd, "policy")) {
			json_t *p = nargs == 2 ? json_loads(args[1], 0, NULL) : NULL;

			if (!p) {
				fprintf(stderr, "vmnapctl: policy VM JSON\n");
				return EXIT_USAGE;
			}
			j = json_pack("{s:o}", "policy", p);
		} else {
			j = json_pack("{s:b}", "managed", !strcmp(cmd, "enable"));
		}
		body = dump(j);
		snprintf(path, sizeof(path), "/vms/%s", vm);
		ret = call(&c, "PATCH", path, body, cmd);
		free(body);
		return ret;
	}
	if (!strcmp(cmd, "set-pause")) {
		char *colon = nargs == 2 ? strchr(args[1], ':') : NULL;

		if (!colon) {
			fprintf(stderr, "vmnapctl: set-pause VM BACKEND:PATH\n");
			return EXIT_USAGE;
		}
		*colon = '\0';
		body = dump(json_pack("{s:{s:s,s:s}}", "pause", "backend", args[1], "path", colon + 1));
		snprintf(path, sizeof(path), "/vms/%s", vm);
		ret = call(&c, "PATCH", path, body, cmd);
		free(body);
		return ret;
	}
	if (!strcmp(cmd, "wait-start")) {
		static const struct option wopts[] = {
			{ "kind", required_argument, NULL, 'k' },
			{ "confirm", no_argument, NULL, 'c' },
			{ 0 }
		};
		const char *kind = "model";
		bool confirm = false;

		if (nargs < 2) {
			fprintf(stderr, "vmnapctl: wait-start VM ID [--kind K] [--confirm]\n");
			return EXIT_USAGE;
		}
		optind = 2;
		while ((o = getopt_long(nargs, args, "", wopts, NULL)) != -1) {
			if (o == 'k')
				kind = optarg;
			else if (o == 'c')
				confirm = true;
			else
				return EXIT_USAGE;
		}
		body = dump(json_pack("{s:s,s:s,s:b}", "id", args[1], "kind", kind,
				      "confirm", confirm));
		snprintf(path, sizeof(path), "/vms/%s/waits", vm);
		ret = call(&c, "POST", path, body, cmd);
		free(body);
		return ret;
	}
	if (!strcmp(cmd, "wait-ready") || !strcmp(cmd, "delivered")) {
		if (nargs != 2 || !vm_arg_ok(args[1])) {
			fprintf(stderr, "vmnapctl: %s VM ID\n", cmd);
			return EXIT_USAGE;
		}
		snprintf(path, sizeof(path), "/vms/%s/waits/%s/%s", vm, args[1],
			 !strcmp(cmd, "wait-ready") ? "ready" : "delivered");
		return call(&c, "POST", path, NULL, cmd);
	}
	if (!strcmp(cmd, "event")) {
		body = dump(json_pack("{s:s}", "source", nargs > 1 ? args[1] : "vmnapctl"));
		snprintf(path, sizeof(path), "/vms/%s/events", vm);
		ret = call(&c, "POST", path, body, cmd);
		free(body);
		return ret;
	}
	if (!strcmp(cmd, "pause") || !strcmp(cmd, "offload") || !strcmp(cmd, "resume")) {
		snprintf(path, sizeof(path), "/vms/%s/actions/%s", vm, cmd);
		return call(&c, "POST", path, NULL, cmd);
	}
	fprintf(stderr, "vmnapctl: unknown command '%s'\n", cmd);
	usage(stderr);
	return EXIT_USAGE;
}
