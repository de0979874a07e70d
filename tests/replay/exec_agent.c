// SPDX-License-Identifier: GPL-2.0-only
/*
 * exec_agent.c - the replay benchmark's in-guest command executor.
 *
 * Listens on a vsock stream port (default 1234) and runs one command per
 * connection; or, with --tty DEV, serves the same frames one after another
 * on a raw character device (the launcher's /dev/ttyS1 line), which lets the
 * benchmark reach a guest before a vsock bridge exists.
 *
 * Wire format (all lengths big-endian u32):
 *   request : "VXRQ" len JSON
 *             JSON = {"argv": [str, ...], "cwd": str?, "timeout_ms": int?}
 *   ack     : "VXAK" as soon as a request is accepted, before it runs (the
 *             host's measure of "the guest has the data")
 *   response: "VXRS" len JSON stdout-bytes stderr-bytes
 *             JSON = {"ok": true, "exit_code": int, "signal": int,
 *                     "timed_out": bool, "duration_ns": int,
 *                     "stdout_len": int, "stderr_len": int,        (returned)
 *                     "stdout_total": int, "stderr_total": int,    (produced)
 *                     "stdout_sha256": hex, "stderr_sha256": hex}  (of all)
 *          or {"ok": false, "error": str} with no bytes after it.
 *
 * The peer is hostile: frame and field sizes are bounded, the JSON is parsed
 * with jansson and checked field by field, a peer that stalls is dropped
 * after a read timeout, and nothing the peer sends can stop the agent.  The
 * command runs without a shell unless argv asks for one, in its own process
 * group, killed on timeout, with a fixed environment.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <linux/vm_sockets.h>
#include <nettle/sha2.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define AGENT_DEFAULT_PORT	1234
#define REQ_MAGIC		"VXRQ"
#define RSP_MAGIC		"VXRS"
#define ACK_MAGIC		"VXAK"
#define MAGIC_LEN		4
#define REQ_MAX_BYTES		(64 * 1024)
#define ARGV_MAX		64
#define OUTPUT_RETURN_MAX	(1024 * 1024)	/* bytes returned per stream */
#define TIMEOUT_DEFAULT_MS	60000
#define TIMEOUT_MAX_MS		600000
#define PEER_READ_TIMEOUT_S	10
#define PIPE_CHUNK		4096
#define LISTEN_BACKLOG		8
#define NSEC_PER_SEC		1000000000LL
#define NSEC_PER_MSEC		1000000LL

static const char *const command_env[] = {
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/root", "LANG=C.UTF-8", "LC_ALL=C.UTF-8", "TERM=dumb",
	"PYTHONDONTWRITEBYTECODE=1", "PYTHONHASHSEED=0", "GIT_PAGER=cat",
	"PAGER=cat", "TZ=UTC", NULL,
};

struct out_stream {
	int fd;			/* read end, -1 at EOF */
	char *buf;		/* first OUTPUT_RETURN_MAX bytes */
	size_t len;		/* bytes kept in buf */
	uint64_t total;		/* bytes produced */
	struct sha256_ctx sha;
};

struct exec_result {
	int exit_code;		/* -1 if killed by a signal */
	int signal;
	bool timed_out;
	int64_t duration_ns;
	struct out_stream out[2];	/* stdout, stderr */
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

static void log_msg(const char *fmt, const char *detail)
{
	fprintf(stderr, "exec_agent: ");
	fprintf(stderr, fmt, detail);
	fputc('\n', stderr);
}

/* Read exactly len bytes; 0, -EIO at EOF, or -errno (EAGAIN = peer stalled). */
static int read_full(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		if (n == 0)
			return -EIO;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void put_be32(unsigned char *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

static uint32_t get_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

/* Send a response header JSON, then the given byte blocks. */
static int send_frame(int fd, json_t *hdr, const struct exec_result *res)
{
	unsigned char pre[MAGIC_LEN + 4];
	char *text = json_dumps(hdr, JSON_COMPACT);
	int err;

	if (!text)
		return -ENOMEM;
	memcpy(pre, RSP_MAGIC, MAGIC_LEN);
	put_be32(pre + MAGIC_LEN, (uint32_t)strlen(text));
	err = write_full(fd, pre, sizeof(pre));
	if (!err)
		err = write_full(fd, text, strlen(text));
	for (int i = 0; res && !err && i < 2; i++)
		err = write_full(fd, res->out[i].buf, res->out[i].len);
	free(text);
	return err;
}

static int send_error(int fd, const char *why)
{
	json_t *hdr = json_pack("{s:b, s:s}", "ok", 0, "error", why);
	int err;

	if (!hdr)
		return -ENOMEM;
	err = send_frame(fd, hdr, NULL);
	json_decref(hdr);
	return err;
}

static void hex_digest(struct sha256_ctx *sha, char out[2 * SHA256_DIGEST_SIZE + 1])
{
	uint8_t d[SHA256_DIGEST_SIZE];

	sha256_digest(sha, sizeof(d), d);
	for (size_t i = 0; i < sizeof(d); i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static int send_result(int fd, struct exec_result *res)
{
	char dig[2][2 * SHA256_DIGEST_SIZE + 1];
	json_t *hdr;
	int err;

	hex_digest(&res->out[0].sha, dig[0]);
	hex_digest(&res->out[1].sha, dig[1]);
	hdr = json_pack("{s:b, s:i, s:i, s:b, s:I, s:I, s:I, s:I, s:I, s:s, s:s}",
			"ok", 1, "exit_code", res->exit_code,
			"signal", res->signal, "timed_out", res->timed_out,
			"duration_ns", (json_int_t)res->duration_ns,
			"stdout_len", (json_int_t)res->out[0].len,
			"stderr_len", (json_int_t)res->out[1].len,
			"stdout_total", (json_int_t)res->out[0].total,
			"stderr_total", (json_int_t)res->out[1].total,
			"stdout_sha256", dig[0], "stderr_sha256", dig[1]);
	if (!hdr)
		return -ENOMEM;
	err = send_frame(fd, hdr, res);
	json_decref(hdr);
	return err;
}

struct exec_request {
	const char *argv[ARGV_MAX + 1];
	const char *cwd;
	int timeout_ms;
};

/*
 * Check a parsed request field by field; the strings stay owned by root.
 * Returns NULL or the reason the request is refused.
 */
static const char *request_parse(json_t *root, struct exec_request *req)
{
	json_t *argv, *cwd, *timeout, *v;
	const char *key;
	size_t i;

	if (!json_is_object(root))
		return "request is not a JSON object";
	json_object_foreach(root, key, v) {
		if (strcmp(key, "argv") && strcmp(key, "cwd") && strcmp(key, "timeout_ms"))
			return "unknown request field";
	}
	argv = json_object_get(root, "argv");
	if (!json_is_array(argv) || json_array_size(argv) == 0 ||
	    json_array_size(argv) > ARGV_MAX)
		return "argv must be an array of 1..64 strings";
	json_array_foreach(argv, i, v) {
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
			return "argv entries must be strings without NUL";
		req->argv[i] = json_string_value(v);
	}
	req->argv[json_array_size(argv)] = NULL;
	if (req->argv[0][0] != '/')
		return "argv[0] must be an absolute path";
	cwd = json_object_get(root, "cwd");
	req->cwd = "/";
	if (cwd) {
		if (!json_is_string(cwd) || strlen(json_string_value(cwd)) != json_string_length(cwd) ||
		    json_string_value(cwd)[0] != '/')
			return "cwd must be an absolute path";
		req->cwd = json_string_value(cwd);
	}
	timeout = json_object_get(root, "timeout_ms");
	req->timeout_ms = TIMEOUT_DEFAULT_MS;
	if (timeout) {
		if (!json_is_integer(timeout) || json_integer_value(timeout) <= 0 ||
		    json_integer_value(timeout) > TIMEOUT_MAX_MS)
			return "timeout_ms must be an integer in 1..600000";
		req->timeout_ms = (int)json_integer_value(timeout);
	}
	return NULL;
}

static void stream_consume(struct out_stream *s)
{
	char chunk[PIPE_CHUNK];
	ssize_t n = read(s->fd, chunk, sizeof(chunk));

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		close(s->fd);
		s->fd = -1;
		return;
	}
	sha256_update(&s->sha, (size_t)n, (const uint8_t *)chunk);
	s->total += (uint64_t)n;
	if (s->len < OUTPUT_RETURN_MAX) {
		size_t keep = (size_t)n;

		if (keep > OUTPUT_RETURN_MAX - s->len)
			keep = OUTPUT_RETURN_MAX - s->len;
		memcpy(s->buf + s->len, chunk, keep);
		s->len += keep;
	}
}

static void child_exec(const struct exec_request *req, int out_w, int err_w)
{
	int devnull = open("/dev/null", O_RDONLY);

	setpgid(0, 0);
	if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(out_w, 1) < 0 || dup2(err_w, 2) < 0)
		_exit(127);
	if (chdir(req->cwd) < 0) {
		dprintf(2, "exec_agent: chdir %s: %s\n", req->cwd, strerror(errno));
		_exit(126);
	}
	signal(SIGPIPE, SIG_DFL);
	execve(req->argv[0], (char *const *)req->argv, (char *const *)command_env);
	dprintf(2, "exec_agent: exec %s: %s\n", req->argv[0], strerror(errno));
	_exit(127);
}

/* Run the request; collect output, digests, status. */
static int run_command(const struct exec_request *req, struct exec_result *res)
{
	int pipes[2][2] = { { -1, -1 }, { -1, -1 } };
	int64_t start = now_ns(), deadline = start + req->timeout_ms * NSEC_PER_MSEC;
	int status = 0;
	pid_t pid;

	memset(res, 0, sizeof(*res));
	for (int i = 0; i < 2; i++) {
		res->out[i].fd = -1;
		sha256_init(&res->out[i].sha);
		res->out[i].buf = malloc(OUTPUT_RETURN_MAX);
		if (!res->out[i].buf || pipe2(pipes[i], O_CLOEXEC) < 0)
			goto fail;
	}
	pid = fork();
	if (pid < 0)
		goto fail;
	if (pid == 0)
		child_exec(req, pipes[0][1], pipes[1][1]);
	setpgid(pid, pid);
	for (int i = 0; i < 2; i++) {
		close(pipes[i][1]);
		res->out[i].fd = pipes[i][0];
	}
	while (res->out[0].fd >= 0 || res->out[1].fd >= 0) {
		struct pollfd pfd[2];
		int64_t left = deadline - now_ns();
		int n;

		if (left <= 0 && !res->timed_out) {
			res->timed_out = true;
			kill(-pid, SIGKILL);
		}
		for (int i = 0; i < 2; i++)
			pfd[i] = (struct pollfd){ .fd = res->out[i].fd, .events = POLLIN };
		n = poll(pfd, 2, res->timed_out ? 1000 : (int)(left / NSEC_PER_MSEC) + 1);
		if (n < 0 && errno != EINTR)
			break;
		for (int i = 0; i < 2; i++)
			if (n > 0 && pfd[i].revents)
				stream_consume(&res->out[i]);
		if (n == 0 && res->timed_out)	/* grandchildren keep pipes open */
			break;
	}
	for (int i = 0; i < 2; i++)
		if (res->out[i].fd >= 0)
			close(res->out[i].fd);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	res->duration_ns = now_ns() - start;
	if (WIFEXITED(status)) {
		res->exit_code = WEXITSTATUS(status);
	} else {
		res->exit_code = -1;
		res->signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
	}
	return 0;
fail:
	for (int i = 0; i < 2; i++) {
		if (pipes[i][0] >= 0)
			close(pipes[i][0]);
		if (pipes[i][1] >= 0)
			close(pipes[i][1]);
	}
	return -errno;
}

static void result_free(struct exec_result *res)
{
	free(res->out[0].buf);
	free(res->out[1].buf);
}

/*
 * Read and serve the rest of one request frame, its magic already read.
 * Returns 0 when the stream is still in step (another frame may follow), or
 * -errno when it is not.
 */
static int serve_body(int fd)
{
	unsigned char lenbuf[4];
	struct exec_request req;
	struct exec_result res;
	json_error_t jerr;
	const char *why;
	json_t *root;
	uint32_t len;
	char *body;
	int err;

	err = read_full(fd, lenbuf, sizeof(lenbuf));
	if (err)
		return err;
	len = get_be32(lenbuf);
	if (len == 0 || len > REQ_MAX_BYTES) {
		send_error(fd, "request length out of range");
		return -EMSGSIZE;
	}
	body = malloc(len);
	if (!body)
		return -ENOMEM;
	err = read_full(fd, body, len);
	if (err) {
		free(body);
		return err;
	}
	root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
	free(body);
	if (!root)
		return send_error(fd, "request is not valid JSON");
	why = request_parse(root, &req);
	if (why) {
		err = send_error(fd, why);
		json_decref(root);
		return err;
	}
	err = write_full(fd, ACK_MAGIC, MAGIC_LEN);
	if (err) {
		json_decref(root);
		return err;
	}
	err = run_command(&req, &res);
	json_decref(root);
	if (err) {
		result_free(&res);
		return send_error(fd, "cannot start command");
	}
	err = send_result(fd, &res);
	result_free(&res);
	return err;
}

/* Serve one whole frame: -EPROTO if it does not start with the magic. */
static int serve_one(int fd)
{
	unsigned char magic[MAGIC_LEN];
	int err = read_full(fd, magic, sizeof(magic));

	if (err)
		return err;
	if (memcmp(magic, REQ_MAGIC, MAGIC_LEN)) {
		send_error(fd, "bad frame magic");
		return -EPROTO;
	}
	return serve_body(fd);
}

static int serve_vsock(unsigned int port)
{
	struct sockaddr_vm addr = {
		.svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_ANY, .svm_port = port,
	};
	struct timeval tmo = { .tv_sec = PEER_READ_TIMEOUT_S };
	int lfd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (lfd < 0 || bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    listen(lfd, LISTEN_BACKLOG) < 0) {
		log_msg("vsock listen: %s", strerror(errno));
		return 1;
	}
	fprintf(stderr, "exec_agent: listening on vsock port %u\n", port);
	for (;;) {
		int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

		if (cfd < 0) {
			if (errno != EINTR && errno != ECONNABORTED)
				log_msg("accept: %s", strerror(errno));
			continue;
		}
		setsockopt(cfd, SOL_SOCKET, SO_RCVTIMEO, &tmo, sizeof(tmo));
		setsockopt(cfd, SOL_SOCKET, SO_SNDTIMEO, &tmo, sizeof(tmo));
		serve_one(cfd);
		close(cfd);
	}
}

/* Skip input until the request magic has been seen (resynchronise). */
static int tty_resync(int fd)
{
	size_t matched = 0;

	while (matched < MAGIC_LEN) {
		char c;
		int err = read_full(fd, &c, 1);

		if (err)
			return err;
		matched = c == REQ_MAGIC[matched] ? matched + 1 : (c == REQ_MAGIC[0]);
	}
	return 0;
}

static int serve_tty(const char *dev)
{
	struct termios tio;
	int fd = open(dev, O_RDWR | O_NOCTTY | O_CLOEXEC);

	if (fd < 0 || tcgetattr(fd, &tio) < 0) {
		log_msg("open tty: %s", strerror(errno));
		return 1;
	}
	cfmakeraw(&tio);
	tcsetattr(fd, TCSANOW, &tio);
	fprintf(stderr, "exec_agent: serving %s\n", dev);
	for (;;) {
		int err = serve_one(fd);

		/* A byte stream has no connection to drop: find the next frame. */
		while (err == -EPROTO || err == -EMSGSIZE) {
			err = tty_resync(fd);
			if (!err)
				err = serve_body(fd);
		}
		if (err == -EIO)
			sleep(1);	/* host side not connected */
	}
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "port", required_argument, NULL, 'p' },
		{ "tty", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned long port = AGENT_DEFAULT_PORT;
	const char *tty = NULL;
	int c;

	while ((c = getopt_long(argc, argv, "p:t:h", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			port = strtoul(optarg, NULL, 10);
			break;
		case 't':
			tty = optarg;
			break;
		default:
			fprintf(stderr, "usage: %s [--port N | --tty DEV]\n", argv[0]);
			return c == 'h' ? 0 : 2;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	return tty ? serve_tty(tty) : serve_vsock((unsigned int)port);
}
