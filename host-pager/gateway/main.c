// SPDX-License-Identifier: GPL-2.0-only
/*
 * main.c - vmnap-gateway: options, listeners, the admin socket (metrics),
 * signals.  See README "vmnap-gateway".
 */
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <microhttpd.h>

#include "gw.h"

#ifndef VMNAP_VERSION
#define VMNAP_VERSION	"unknown"	/* the build passes VERSION's */
#endif

struct gw_config gw_cfg = {
	.api_sock = "/run/vmnap/api.sock",
	.spool_dir = "/tmp",
	.hold_mem = 1 << 20,
	.spool_max = 1ull << 30,
	.max_body = 64 << 20,
	.max_conns = 256,
	.client_timeout_s = 60,
	.connect_timeout_ms = 10000,
	.upstream_timeout_ms = 0,
	.max_hold_ns = 10000000000ull,
	.net_stall_ns = 200000000ull,
};
struct gw_counters gw_total;
atomic_bool gw_vmnapd_down;

static void usage(FILE *f)
{
	fprintf(f,
"usage: vmnap-gateway --listen VM=unix:PATH|tcp:HOST:PORT [--listen ...]\n"
"                     --upstream URL [options]\n"
"       vmnap-gateway --proxy VM=unix:PATH|tcp:HOST:PORT [--proxy ...] [options]\n"
"       vmnap-gateway --fake-upstream TRAJECTORY.jsonl --listen NAME=unix:PATH|tcp:HOST:PORT\n"
"Each listener is one VM's model API base URL; requests go to URL + path,\n"
"each is a \"model\" wait on VM in vmnapd, marked ready at the first response byte.\n"
"Each --proxy is an HTTP proxy (CONNECT and http:// URIs) for VM's downloads:\n"
"an upstream silent --net-stall ms after the client spoke is a \"network\" wait.\n"
"options:\n"
"  --api PATH              vmnapd's control API socket (/run/vmnap/api.sock)\n"
"  --upstream-unix PATH    reach the upstream through this unix socket\n"
"  --upstream-ca FILE      trust these CAs for an HTTPS upstream (libcurl's bundle)\n"
"  --admin unix:PATH|tcp:HOST:PORT   GET /metrics (Prometheus text)\n"
"  --hold-buffer BYTES     response bytes held in memory before spilling (1 MiB)\n"
"  --spool-dir DIR         where spilled responses go (/tmp)\n"
"  --spool-max BYTES       per response; beyond, the upstream is paused (1 GiB)\n"
"  --max-body BYTES        request body limit (64 MiB)\n"
"  --max-conns N           client connections per listener (256)\n"
"  --client-timeout SEC    idle client connection (60)\n"
"  --connect-timeout MS    upstream connect (10000)\n"
"  --upstream-timeout MS   until the upstream's first response byte, 0 = none (0)\n"
"  --max-hold MS           hold after ready until vmnapd reports it delivered (10000)\n"
"  --net-stall MS          proxy: upstream silence that raises a network wait (200)\n"
"  -l, --log-level LEVEL   err, warn, info, debug (info)\n"
"  -h, --help              this text\n"
"  -V, --version           print the version\n");
}

/* "unix:PATH" or "tcp:HOST:PORT" (IPv4). */
int gw_listen(const char *spec, char *unix_path, size_t n)
{
	int fd, one = 1;

	unix_path[0] = 0;
	if (!strncmp(spec, "unix:", 5)) {
		struct sockaddr_un a = { .sun_family = AF_UNIX };
		const char *p = spec + 5;
		struct stat st;

		if (!*p || strlen(p) >= sizeof(a.sun_path) || strlen(p) >= n) {
			fprintf(stderr, "vmnap-gateway: %s: bad socket path\n", spec);
			return -1;
		}
		strcpy(a.sun_path, p);
		if (!lstat(p, &st)) {
			if (!S_ISSOCK(st.st_mode)) {
				fprintf(stderr, "vmnap-gateway: %s exists and is not a socket\n", p);
				return -1;
			}
			fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
			if (fd >= 0 && !connect(fd, (struct sockaddr *)&a, sizeof(a))) {
				fprintf(stderr, "vmnap-gateway: another process listens on %s\n", p);
				close(fd);
				return -1;
			}
			if (fd >= 0)
				close(fd);
			unlink(p);
		}
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 128)) {
			fprintf(stderr, "vmnap-gateway: %s: %s\n", spec, strerror(errno));
			if (fd >= 0)
				close(fd);
			return -1;
		}
		strcpy(unix_path, p);
		return fd;
	}
	if (!strncmp(spec, "tcp:", 4)) {
		struct sockaddr_in a = { .sin_family = AF_INET };
		char host[64];
		const char *colon = strrchr(spec + 4, ':');
		char *end;
		long port;

		if (!colon || (size_t)(colon - spec - 4) >= sizeof(host)) {
			fprintf(stderr, "vmnap-gateway: %s: want tcp:HOST:PORT\n", spec);
			return -1;
		}
		memcpy(host, spec + 4, (size_t)(colon - spec - 4));
		host[colon - spec - 4] = 0;
		port = strtol(colon + 1, &end, 10);
		if (*end || port < 0 || port > 65535 || inet_pton(AF_INET, host, &a.sin_addr) != 1) {
			fprintf(stderr, "vmnap-gateway: %s: want tcp:IPV4:PORT\n", spec);
			return -1;
		}
		a.sin_port = htons((uint16_t)port);
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0)
			setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 128)) {
			fprintf(stderr, "vmnap-gateway: %s: %s\n", spec, strerror(errno));
			if (fd >= 0)
				close(fd);
			return -1;
		}
		return fd;
	}
	fprintf(stderr, "vmnap-gateway: %s: want unix:PATH or tcp:HOST:PORT\n", spec);
	return -1;
}

static bool vm_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (!n || n >= GW_NAME_MAX)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      *s == '_' || *s == '.' || *s == '-'))
			return false;
	return true;
}

static struct listener *add_listener(const char *arg, bool proxy)
{
	const char *eq = strchr(arg, '=');
	struct listener *l, **pp;

	if (!eq || (size_t)(eq - arg) >= GW_NAME_MAX || strlen(eq + 1) >= sizeof(l->spec)) {
		fprintf(stderr, "vmnap-gateway: --listen %s: want VM=unix:PATH or VM=tcp:HOST:PORT\n", arg);
		return NULL;
	}
	l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	memcpy(l->vm, arg, (size_t)(eq - arg));
	snprintf(l->spec, sizeof(l->spec), "%s", eq + 1);
	l->fd = -1;
	l->proxy = proxy;
	if (!vm_name_ok(l->vm)) {
		fprintf(stderr, "vmnap-gateway: --listen %s: bad VM name\n", arg);
		free(l);
		return NULL;
	}
	for (pp = &gw_cfg.listeners; *pp; pp = &(*pp)->next) {
		if (!strcmp((*pp)->vm, l->vm) && (*pp)->proxy == proxy) {
			fprintf(stderr, "vmnap-gateway: %s %s: VM %s has a listener already\n",
				proxy ? "--proxy" : "--listen", arg, l->vm);
			free(l);
			return NULL;
		}
	}
	*pp = l;
	return l;
}

/* ---- metrics -------------------------------------------------------------- */

/* The per-listener counters: model listeners' names, then proxies' ("proxy_"). */
static const struct counter_def {
	bool proxy;
	const char *name, *help;
	size_t off;
} counters[] = {
#define C(px, name, help, field) { px, name, help, offsetof(struct gw_counters, field) }
	C(false, "requests_total", "requests received", requests),
	C(false, "responses_total", "responses begun", responses),
	C(false, "rejected_total", "requests refused by the gateway (4xx)", rejected),
	C(false, "waits_started_total", "waits vmnapd accepted", waits_started),
	C(false, "waits_ready_total", "waits marked ready", waits_ready),
	C(false, "held_total", "responses held until the VM ran again", held),
	C(false, "hold_timeouts_total", "holds given up after --max-hold", hold_timeouts),
	C(false, "hold_ns_total", "data ready to release, summed, in ns", hold_ns_total),
	C(false, "client_gone_total", "clients that left before the end", client_gone),
	C(false, "spilled_bytes_total", "response bytes held in a temp file", spilled_bytes),
	C(false, "backpressure_total", "upstream paused: spool at --spool-max", backpressure),
	C(false, "bytes_out_total", "response body bytes to clients", bytes_out),
	C(true, "proxy_requests_total", "proxy requests received", requests),
	C(true, "proxy_rejected_total", "proxy requests refused (4xx, 503)", rejected),
	C(true, "proxy_tunnels_total", "CONNECT tunnels and plain requests forwarded", responses),
	C(true, "proxy_network_waits_total", "network waits raised (upstream silent)", net_waits),
	C(true, "proxy_waits_started_total", "network waits vmnapd accepted", waits_started),
	C(true, "proxy_bytes_out_total", "bytes from upstreams to clients", bytes_out),
#undef C
};

static void metric_counter(struct gw_buf *b, const struct counter_def *d)
{
	gw_bprintf(b, "# HELP vmnap_gateway_%s %s\n# TYPE vmnap_gateway_%s counter\n", d->name, d->help,
		d->name);
	for (struct listener *l = gw_cfg.listeners; l; l = l->next)
		if (l->proxy == d->proxy)
			gw_bprintf(b, "vmnap_gateway_%s{vm=\"%s\"} %llu\n", d->name, l->vm,
				(unsigned long long)atomic_load((const atomic_ullong *)
								((const char *)&l->c + d->off)));
}

/* One series per listener and label value of a counter array. */
static void metric_array(struct gw_buf *b, bool proxy, const char *name, const char *help,
			 const char *label, const char *const *values, int n, size_t field_off)
{
	gw_bprintf(b, "# HELP vmnap_gateway_%s %s\n# TYPE vmnap_gateway_%s counter\n", name, help, name);
	for (struct listener *l = gw_cfg.listeners; l; l = l->next) {
		const atomic_ullong *a = (const atomic_ullong *)((const char *)&l->c + field_off);

		if (l->proxy != proxy)
			continue;
		for (int i = 0; i < n; i++)
			gw_bprintf(b, "vmnap_gateway_%s{vm=\"%s\",%s=\"%s\"} %llu\n", name, l->vm, label,
				values[i], (unsigned long long)atomic_load(&a[i]));
	}
}

char *gw_metrics_text(size_t *len)
{
	static const char *const unm[] = { "vmnapd_down", "refused" };
	static const char *const upf[] = { "connect", "timeout", "reset", "tls", "other" };
	struct gw_buf b = { .p = malloc(4096), .cap = 4096 };

	if (!b.p)
		return NULL;
	b.p[0] = 0;
	for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++)
		if (!counters[i].proxy)
			metric_counter(&b, &counters[i]);
	metric_array(&b, false, "unmanaged_total", "requests forwarded without a wait", "reason",
		     unm, GW_NR_UNM, offsetof(struct gw_counters, unmanaged));
	metric_array(&b, false, "upstream_errors_total", "upstream transport errors", "kind",
		     upf, GW_NR_UPFAIL, offsetof(struct gw_counters, upstream_errors));
	for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++)
		if (counters[i].proxy)
			metric_counter(&b, &counters[i]);
	metric_array(&b, true, "proxy_unmanaged_total", "network waits vmnapd did not take", "reason",
		     unm, GW_NR_UNM, offsetof(struct gw_counters, unmanaged));
	metric_array(&b, true, "proxy_upstream_errors_total", "targets not reached (502, 504)", "kind",
		     upf, GW_NR_UPFAIL, offsetof(struct gw_counters, upstream_errors));
	gw_bprintf(&b, "# HELP vmnap_gateway_vmnapd_up 1 when vmnapd answered last\n"
		"# TYPE vmnap_gateway_vmnapd_up gauge\nvmnap_gateway_vmnapd_up %d\n",
		!atomic_load(&gw_vmnapd_down));
	if (b.oom) {
		free(b.p);
		return NULL;
	}
	*len = b.len;
	return b.p;
}

static enum MHD_Result on_admin(void *cls, struct MHD_Connection *conn, const char *url,
				const char *method, const char *version, const char *upload_data,
				size_t *upload_data_size, void **req_cls)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;
	unsigned int status = MHD_HTTP_OK;
	char *text = NULL;
	size_t len = 0;

	(void)cls;
	(void)version;
	(void)upload_data;
	if (!*req_cls) {
		*req_cls = conn;
		return MHD_YES;
	}
	*upload_data_size = 0;
	if (strcmp(method, "GET")) {
		status = MHD_HTTP_METHOD_NOT_ALLOWED;
	} else if (!strcmp(url, "/metrics")) {
		text = gw_metrics_text(&len);
		if (!text)
			status = MHD_HTTP_INTERNAL_SERVER_ERROR;
	} else {
		status = MHD_HTTP_NOT_FOUND;
	}
	if (text)
		resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	else
		resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
	if (!resp) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", "text/plain; version=0.0.4");
	ret = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
	got_signal = sig;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "api", required_argument, NULL, 'a' },
		{ "listen", required_argument, NULL, 'L' },
		{ "upstream", required_argument, NULL, 'u' },
		{ "upstream-unix", required_argument, NULL, 'U' },
		{ "upstream-ca", required_argument, NULL, 'K' },
		{ "admin", required_argument, NULL, 'A' },
		{ "hold-buffer", required_argument, NULL, 'H' },
		{ "spool-dir", required_argument, NULL, 'd' },
		{ "spool-max", required_argument, NULL, 'S' },
		{ "max-body", required_argument, NULL, 'B' },
		{ "max-conns", required_argument, NULL, 'C' },
		{ "client-timeout", required_argument, NULL, 'T' },
		{ "connect-timeout", required_argument, NULL, 'c' },
		{ "upstream-timeout", required_argument, NULL, 't' },
		{ "max-hold", required_argument, NULL, 'M' },
		{ "proxy", required_argument, NULL, 'P' },
		{ "net-stall", required_argument, NULL, 'N' },
		{ "fake-upstream", required_argument, NULL, 'F' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *admin = NULL, *fake = NULL;
	char admin_path[108] = "";
	struct MHD_Daemon *admin_mhd = NULL;
	struct sigaction sa = { .sa_handler = on_signal };
	int c, admin_fd = -1, rc = 0;
	char *end;
	unsigned long long v;
	struct listener *l;
	bool model = false;

	while ((c = getopt_long(argc, argv, "l:hV", opts, NULL)) != -1) {
		v = optarg ? strtoull(optarg, &end, 10) : 0;
		if (strchr("HSBCTctMN", c) && (!optarg || !*optarg || *end)) {
			fprintf(stderr, "vmnap-gateway: %s wants a number\n", argv[optind - 1]);
			return 2;
		}
		switch (c) {
		case 'a': gw_cfg.api_sock = optarg; break;
		case 'L': if (!add_listener(optarg, false)) return 2; break;
		case 'P': if (!add_listener(optarg, true)) return 2; break;
		case 'N': gw_cfg.net_stall_ns = (v ? v : 1) * 1000000ull; break;
		case 'u': gw_cfg.upstream = optarg; break;
		case 'U': gw_cfg.upstream_unix = optarg; break;
		case 'K': gw_cfg.upstream_ca = optarg; break;
		case 'A': admin = optarg; break;
		case 'H': gw_cfg.hold_mem = v ? (size_t)v : 1; break;
		case 'd': gw_cfg.spool_dir = optarg; break;
		case 'S': gw_cfg.spool_max = v ? v : 1; break;
		case 'B': gw_cfg.max_body = (size_t)v; break;
		case 'C': gw_cfg.max_conns = v ? (unsigned int)v : 1; break;
		case 'T': gw_cfg.client_timeout_s = (unsigned int)v; break;
		case 'c': gw_cfg.connect_timeout_ms = (long)v; break;
		case 't': gw_cfg.upstream_timeout_ms = (long)v; break;
		case 'M': gw_cfg.max_hold_ns = v * 1000000ull; break;
		case 'F': fake = optarg; break;
		case 'l':
			if (!strcmp(optarg, "err")) gw_log_level = GW_ERR;
			else if (!strcmp(optarg, "warn")) gw_log_level = GW_WARN;
			else if (!strcmp(optarg, "info")) gw_log_level = GW_INFO;
			else if (!strcmp(optarg, "debug")) gw_log_level = GW_DEBUG;
			else { fprintf(stderr, "vmnap-gateway: bad log level %s\n", optarg); return 2; }
			break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("vmnap-gateway %s\n", VMNAP_VERSION); return 0;
		default: usage(stderr); return 2;
		}
	}
	for (l = gw_cfg.listeners; l; l = l->next)
		if (!l->proxy)
			model = true;
	if (optind != argc || !gw_cfg.listeners || (!fake && model && !gw_cfg.upstream) ||
	    (fake && !model)) {
		usage(stderr);
		return 2;
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	for (l = gw_cfg.listeners; l; l = l->next) {
		l->fd = gw_listen(l->spec, l->unix_path, sizeof(l->unix_path));
		if (l->fd < 0)
			return 1;
	}
	if (fake) {
		rc = fake_main(fake, gw_cfg.listeners);
		goto out_unlink;
	}
	if (gw_cfg.upstream) {
		size_t n = strlen(gw_cfg.upstream);
		char *u = strdup(gw_cfg.upstream);

		while (u && n && u[n - 1] == '/')
			u[--n] = 0;
		if (!u || (strncmp(u, "http://", 7) && strncmp(u, "https://", 8))) {
			fprintf(stderr, "vmnap-gateway: --upstream wants an http:// or https:// URL\n");
			free(u);
			return 2;
		}
		gw_cfg.upstream = u;
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT) || engine_start()) {
		fprintf(stderr, "vmnap-gateway: cannot start libcurl\n");
		return 1;
	}
	if (admin) {
		admin_fd = gw_listen(admin, admin_path, sizeof(admin_path));
		if (admin_fd < 0) {
			rc = 1;
			goto out;
		}
		admin_mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL, 0, NULL,
					     NULL, on_admin, NULL,
					     MHD_OPTION_LISTEN_SOCKET, (MHD_socket)admin_fd,
					     MHD_OPTION_CONNECTION_LIMIT, 16u,
					     MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
		if (!admin_mhd) {
			fprintf(stderr, "vmnap-gateway: admin %s: cannot start\n", admin);
			rc = 1;
			goto out;
		}
	}
	for (l = gw_cfg.listeners; l; l = l->next) {
		if (l->proxy ? netproxy_start(l) : proxy_start(l)) {
			fprintf(stderr, "vmnap-gateway: %s: cannot start the HTTP server\n", l->spec);
			rc = 1;
			goto out;
		}
		if (l->proxy)
			gw_info(l->vm, "proxy listening on %s (network waits after %llu ms)", l->spec,
				(unsigned long long)(gw_cfg.net_stall_ns / 1000000));
		else
			gw_info(l->vm, "listening on %s -> upstream %s%s%s", l->spec, gw_cfg.upstream,
				gw_cfg.upstream_unix ? " via " : "",
				gw_cfg.upstream_unix ? gw_cfg.upstream_unix : "");
	}
	gw_info(NULL, "vmnapd control API at %s", gw_cfg.api_sock);
	while (!got_signal)
		pause();
	gw_info(NULL, "signal %d: stopping (outstanding waits are marked ready)", (int)got_signal);
out:
	for (l = gw_cfg.listeners; l; l = l->next)
		if (!l->proxy)
			proxy_stop(l);
	netproxy_stop();	/* its connections end their waits through the engine */
	engine_stop();
	if (admin_mhd)
		MHD_stop_daemon(admin_mhd);
	if (admin_path[0])
		unlink(admin_path);
out_unlink:
	for (l = gw_cfg.listeners; l; l = l->next)
		if (l->unix_path[0])
			unlink(l->unix_path);
	return rc;
}
