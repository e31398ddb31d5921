/* sandbox-init: pid 1 of a run's sandbox, and the run process it starts.
 *
 * Why C: pid 1 and the run process used to be forks of the zygote's Python heap, and every
 * object a forked Python process touches dirties (copies) its page: ~1,500 copy-on-write
 * faults and 6-7 ms of CPU per run, more than a whole bwrap launch. This program starts from
 * a tiny address space, statically linked (nothing of the sandbox's /usr is loaded), and does
 * everything after the pid namespace exists: the other namespaces and the root (init_root.c),
 * the run process, the privilege drop of both (drop_privileges), reaping, the report. Python
 * only plans it (init_wire.encode_config and encode_request) and sends the plan as data.
 *
 * Descriptors at start (executed in direct mode, forked by the fork server in zygote mode,
 * see fork_server.c): 0-2 as inherited, 3 the request socket, 4 the configuration (a sealed
 * memfd, read with pread), 5 the "alive" pipe (EOF: the process that started pid 1 is gone),
 * 6 the set-up pipe of a pid 1 that reports (init_wire.spawn), 7.. the pooled cgroup's join
 * files. A pid 1 of a run with an allowlist keeps the proxy's listener at 16 (PROXY_FD).
 * Wire formats (little endian; str = u32 length + bytes, strs = u32 count + count x str,
 * links = u32 count + count x (str path, str target), binds = u32 count + count x (str, u32)):
 *   configuration: "RZI2", u32 uid, u32 gid, u8 rootless, u8 prepare_run, u8 report,
 *                  u8 network, u32 npool, str workdir, u32 n + n x 8 bytes of seccomp filter,
 *                  str hostname, u64 root size, u64 tmp size, u64 tmp inodes,
 *                  u32 system attrs, u32 device attrs, u32 /dev attrs, links symlinks,
 *                  binds system, binds binds, strs devices, links /dev links, strs /proc
 *                  read-only (read_config)
 *   request:       u32 length with SCM_RIGHTS [stdout, stderr, set-up, status, cgroup joins...],
 *                  then: u8 in_cgroup, u32 n, n x (u32 resource, u64 soft, u64 hard),
 *                  str exec path, strs argv, strs env, then (optional) str script path
 *                  (empty: none), str script bytes, then (optional) the file view:
 *                  u32 n, n x (u8 kind, str path, u64 dev, u64 ino) (receive)
 * Status written to the status pipe: i32 wait status, i64 CPU us, i64 peak RSS bytes.
 * Every failure is written to the set-up pipe as "stage: message" before _exit(127).
 */
#include "init.h"

#include <grp.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

#define MAX_FDS 16
#define MAX_REQUEST (16u << 20)

#define KEYCTL_JOIN_SESSION_KEYRING 1
#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif
/* securebits NOROOT, NO_SETUID_FIXUP, KEEP_CAPS (off) and NO_CAP_AMBIENT_RAISE, all locked */
#define LOCKED_SECUREBITS ((1 << 0) | (1 << 1) | (1 << 3) | (1 << 5) | (1 << 6) | (1 << 7))

struct config {
    uint32_t uid, gid;
    int rootless, prepare_run, report, npool;
    char *workdir;
    struct sock_fprog filter;
    struct root_plan root;
};

struct request {
    int in_cgroup;
    uint32_t nlimits;
    struct { uint32_t res; uint64_t soft, hard; } limits[16];
    char *exec_path;
    char **argv, **envp;
    char *script_path;
    const uint8_t *script;
    uint32_t script_len;
    struct view_entry *view;
    uint32_t nview;
    size_t run_part; /* bytes of the body the run process needs (everything before the script) */
    uint8_t *body;
    uint32_t body_len;
    int fds[MAX_FDS];
    int nfds; /* stdout, stderr, set-up, status, cgroup join files... */
};

static struct config cfg;

/* ------------------------------------------------------------------ errors --------------- */

static void report(int fd, const char *stage, const char *fmt, ...) {
    char text[600];
    int n = snprintf(text, sizeof text, "%s: ", stage);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text + n, sizeof text - n, fmt, ap);
    va_end(ap);
    if (fd >= 0) {
        ssize_t ignored = write(fd, text, strlen(text));
        (void)ignored;
    }
    _exit(EXIT_SETUP_FAILED);
}

const char *failed_what;
int failed_errno;

int fail(const char *what) {
    failed_what = what;
    failed_errno = errno;
    return -1;
}

static const char *why(void) {
    static char text[300];
    if (failed_errno)
        snprintf(text, sizeof text, "%s: %s", failed_what, strerror(failed_errno));
    else
        snprintf(text, sizeof text, "%s", failed_what);
    return text;
}

/* ------------------------------------------------------------------ reading -------------- */

struct cursor {
    const uint8_t *p;
    size_t left;
    int ok;
};

static uint64_t take(struct cursor *c, size_t n) {
    uint64_t v = 0;
    if (c->left < n) {
        c->ok = 0;
        return 0;
    }
    for (size_t i = 0; i < n; i++) v |= (uint64_t)c->p[i] << (8 * i);
    c->p += n;
    c->left -= n;
    return v;
}

static const uint8_t *take_bytes(struct cursor *c, uint32_t *len) {
    *len = (uint32_t)take(c, 4);
    if (!c->ok || c->left < *len) {
        c->ok = 0;
        return NULL;
    }
    const uint8_t *p = c->p;
    c->p += *len;
    c->left -= *len;
    return p;
}

static char *take_str(struct cursor *c) {
    uint32_t len;
    const uint8_t *p = take_bytes(c, &len);
    if (!p) return NULL;
    char *s = malloc(len + 1);
    if (!s) {
        c->ok = 0;
        return NULL;
    }
    memcpy(s, p, len);
    s[len] = 0;
    return s;
}

static char **take_strs(struct cursor *c) {
    uint32_t n = (uint32_t)take(c, 4);
    if (!c->ok || n > c->left / 4) {
        c->ok = 0;
        return NULL;
    }
    char **v = calloc(n + 1, sizeof *v);
    if (!v) {
        c->ok = 0;
        return NULL;
    }
    for (uint32_t i = 0; i < n && c->ok; i++) v[i] = take_str(c);
    return c->ok ? v : NULL;
}

static int read_all(int fd, uint8_t *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return 0;
}

static int write_all(int fd, const void *buf, size_t n) {
    const uint8_t *p = buf;
    while (n) {
        ssize_t r = write(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static struct link *take_links(struct cursor *c, uint32_t *n) {
    *n = (uint32_t)take(c, 4);
    if (!c->ok || *n > c->left / 8) {
        c->ok = 0;
        return NULL;
    }
    struct link *v = calloc(*n + 1, sizeof *v);
    for (uint32_t i = 0; v && i < *n && c->ok; i++) {
        v[i].path = take_str(c);
        v[i].target = take_str(c);
    }
    return v;
}

static struct bind_spec *take_binds(struct cursor *c, uint32_t *n) {
    *n = (uint32_t)take(c, 4);
    if (!c->ok || *n > c->left / 8) {
        c->ok = 0;
        return NULL;
    }
    struct bind_spec *v = calloc(*n + 1, sizeof *v);
    for (uint32_t i = 0; v && i < *n && c->ok; i++) {
        v[i].path = take_str(c);
        v[i].attrs = take(c, 4);
    }
    return v;
}

static char **take_counted_strs(struct cursor *c, uint32_t *n) {
    const uint8_t *at = c->p;
    *n = (uint32_t)take(c, 4);
    c->p = at; /* take_strs reads the count itself */
    c->left += 4;
    return take_strs(c);
}

/* The configuration (init_wire.encode_config), from the memfd ``fd`` (closed here). */
static int read_config(int fd) {
    struct stat st;
    if (fstat(fd, &st) < 0 || st.st_size < 4 || st.st_size > (16 << 20))
        return fail("the configuration");
    uint8_t *buf = malloc((size_t)st.st_size);
    if (!buf || pread(fd, buf, (size_t)st.st_size, 0) != st.st_size)
        return fail("reading the configuration");
    close(fd);
    struct cursor c = {buf, (size_t)st.st_size, 1};
    errno = 0;
    if (memcmp(buf, CONFIG_MAGIC, 4) != 0) return fail("not a sandbox-init configuration");
    take(&c, 4);
    cfg.uid = (uint32_t)take(&c, 4);
    cfg.gid = (uint32_t)take(&c, 4);
    cfg.rootless = (int)take(&c, 1);
    cfg.prepare_run = (int)take(&c, 1);
    cfg.report = (int)take(&c, 1);
    cfg.root.network = (int)take(&c, 1);
    if (cfg.root.network > NETWORK_PROXY) return fail("malformed configuration (network)");
    cfg.npool = (int)take(&c, 4);
    cfg.workdir = take_str(&c);
    uint32_t n = (uint32_t)take(&c, 4);
    if (!c.ok || n > 4096 || c.left < (size_t)n * 8) return fail("malformed configuration");
    cfg.filter.len = (unsigned short)n;
    cfg.filter.filter = (struct sock_filter *)c.p;
    c.p += (size_t)n * 8;
    c.left -= (size_t)n * 8;
    struct root_plan *r = &cfg.root;
    r->hostname = take_str(&c);
    r->root_size = take(&c, 8);
    r->tmp_size = take(&c, 8);
    r->tmp_inodes = take(&c, 8);
    r->sys_attrs = take(&c, 4);
    r->dev_attrs = take(&c, 4);
    r->dev_dir_attrs = take(&c, 4);
    r->symlinks = take_links(&c, &r->nsymlinks);
    r->system = take_binds(&c, &r->nsystem);
    r->binds = take_binds(&c, &r->nbinds);
    r->devices = take_counted_strs(&c, &r->ndevices);
    r->dev_links = take_links(&c, &r->ndev_links);
    r->proc_ro = take_counted_strs(&c, &r->nproc_ro);
    errno = 0;
    if (!c.ok || c.left || cfg.npool < 0 || cfg.npool > 8) return fail("malformed configuration");
    return 0;
}

/* One request (or a run process's part of it): header with descriptors, then the body.
 * 1: received; 0: EOF before anything (discarded); -1: error. */
static int receive(int sock, struct request *req) {
    uint32_t len = 0;
    char control[CMSG_SPACE(MAX_FDS * sizeof(int))];
    struct iovec iov = {&len, sizeof len};
    struct msghdr msg = {0};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t r;
    do r = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    while (r < 0 && errno == EINTR);
    if (r == 0) return 0;
    if (r < 0) return fail("receiving the request");
    req->nfds = 0;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
            int n = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            for (int i = 0; i < n && req->nfds < MAX_FDS; i++)
                memcpy(&req->fds[req->nfds++], CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
        }
    }
    if (r < (ssize_t)sizeof len && read_all(sock, (uint8_t *)&len + r, sizeof len - r) < 0)
        return fail("receiving the request");
    errno = 0;
    if (len > MAX_REQUEST) return fail("request too large");
    if (req->nfds < 3) return fail("request without its descriptors");
    req->body = malloc(len ? len : 1);
    if (!req->body) return fail("malloc");
    if (read_all(sock, req->body, len) < 0) return fail("receiving the request");
    req->body_len = len;
    struct cursor c = {req->body, len, 1};
    req->in_cgroup = (int)take(&c, 1);
    req->nlimits = (uint32_t)take(&c, 4);
    if (req->nlimits > 16) c.ok = 0;
    for (uint32_t i = 0; i < req->nlimits && c.ok; i++) {
        req->limits[i].res = (uint32_t)take(&c, 4);
        req->limits[i].soft = take(&c, 8);
        req->limits[i].hard = take(&c, 8);
    }
    req->exec_path = take_str(&c);
    req->argv = take_strs(&c);
    req->envp = take_strs(&c);
    req->run_part = len - c.left;
    if (c.left) { /* the run process's part ends here */
        req->script_path = take_str(&c);
        req->script = take_bytes(&c, &req->script_len);
    }
    if (c.ok && c.left) { /* the file view, applied by pid 1 (finish_root) */
        req->nview = (uint32_t)take(&c, 4);
        if (req->nview > c.left / 21) c.ok = 0;
        req->view = c.ok ? calloc(req->nview + 1, sizeof *req->view) : NULL;
        if (!req->view) c.ok = 0;
        for (uint32_t i = 0; i < req->nview && c.ok; i++) {
            req->view[i].kind = (uint32_t)take(&c, 1);
            req->view[i].path = take_str(&c);
            req->view[i].dev = take(&c, 8);
            req->view[i].ino = take(&c, 8);
        }
        if (c.left) c.ok = 0;
    }
    errno = 0;
    if (!c.ok) return fail("malformed request");
    return 1;
}

/* ------------------------------------------------------------------ privileges ----------- */

int write_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = write(fd, text, strlen(text)); /* one write(2): kernel control files */
    int saved = errno;
    close(fd);
    errno = saved;
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

static int lock_securebits(void) {
    if (prctl(PR_GET_SECUREBITS, 0, 0, 0, 0) == LOCKED_SECUREBITS) return 0;
    CHECK(prctl(PR_SET_SECUREBITS, LOCKED_SECUREBITS, 0, 0, 0), "locking securebits");
    return 0;
}

static int drop_bounding_set(void) {
    for (int cap = 0;; cap++) {
        int held = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
        if (held < 0) return 0; /* past the last capability this kernel knows */
        if (held) CHECK(prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "dropping the bounding set");
    }
}

/* All five capability sets read back from the kernel: anything left is an error. */
static int verify_no_capabilities(void) {
    char buf[8192];
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return fail("/proc/self/status");
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return fail("/proc/self/status");
    buf[n] = 0;
    static const char *const sets[] = {"CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"};
    for (int i = 0; i < 5; i++) {
        char *line = strstr(buf, sets[i]);
        if (!line || strtoull(line + strlen(sets[i]), NULL, 16) != 0) {
            errno = 0;
            return fail("capabilities remain after dropping them");
        }
    }
    return 0;
}

static int refuse_root(void) {
    errno = 0;
    return fail("refusing to run as uid 0");
}

/* Who drops: a run process (cold or prepared) before its exec, or pid 1 once the run has
 * exec'd. */
enum dropper { RUN_PROCESS, PID1 };

/* The one way a process of the sandbox gives up root. The order is bubblewrap's (its
 * drop_cap_bounding_set, then drop_privs: the uid, then every capability), with securebits
 * locked first and no_new_privs last, because each step needs what a later one takes away:
 *  1. securebits locked (NOROOT, NO_SETUID_FIXUP, NO_CAP_AMBIENT_RAISE; KEEP_CAPS off): from
 *     here neither an id change nor an exec can hand a capability back (needs CAP_SETPCAP);
 *  2. the bounding set emptied, so nothing executed later gains a capability from a file
 *     (needs CAP_SETPCAP: before the capability sets are cleared);
 *  3. supplementary groups, gid, then uid (setgroups and setresgid need CAP_SETGID,
 *     setresuid CAP_SETUID), each read back;
 *  4. uid or gid 0 refused, whatever the configuration said: validated in the helper
 *     already, checked again here, after the switch, for every process that drops;
 *  5. the capability sets cleared (steps 1-3 needed them), ambient first, and read back;
 *  6. no_new_privs, which the seccomp filter the caller installs next requires.
 * Rootless, setgroups is denied in the user namespace, and pid 1 keeps its ids: it is 0 of a
 * user namespace made by an unprivileged helper, mapped onto that helper's own uid and
 * nothing else (its run process becomes the configured ids in a nested namespace). */
static int drop_privileges(enum dropper who) {
    int keep_ids = cfg.rootless && who == PID1;
    if (!keep_ids && (cfg.uid == 0 || cfg.gid == 0)) return refuse_root();
    if (lock_securebits() < 0 || drop_bounding_set() < 0) return -1;
    if (!keep_ids) {
        if (!cfg.rootless) CHECK(setgroups(0, NULL), "setgroups");
        CHECK(setresgid(cfg.gid, cfg.gid, cfg.gid), "setresgid");
        CHECK(setresuid(cfg.uid, cfg.uid, cfg.uid), "setresuid");
        uid_t r, e, s;
        gid_t rg, eg, sg;
        if (getresuid(&r, &e, &s) < 0 || getresgid(&rg, &eg, &sg) < 0) return fail("getresuid");
        if (r != cfg.uid || e != cfg.uid || s != cfg.uid || rg != cfg.gid || eg != cfg.gid ||
            sg != cfg.gid) {
            errno = 0;
            return fail("uid/gid change did not take effect");
        }
        if (r == 0 || e == 0 || s == 0 || rg == 0 || eg == 0 || sg == 0) return refuse_root();
    }
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    CHECK(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clearing ambient caps");
    CHECK(syscall(SYS_capset, &header, data), "capset");
    if (verify_no_capabilities() < 0) return -1;
    CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs");
    return 0;
}

static int install_filter(void) {
    CHECK(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &cfg.filter), "seccomp");
    return 0;
}

/* ------------------------------------------------------------------ the run process ------ */

/* Rootless: the run process makes a nested user namespace in which it becomes the configured
 * uid/gid (mapped onto pid 1's 0, i.e. the helper's own uid); see namespaces.py. */
static int enter_run_user_namespace(void) {
    char map[64];
    CHECK(unshare(CLONE_NEWUSER), "unshare(CLONE_NEWUSER)");
    CHECK(prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "dumpable");
    CHECK(write_file("/proc/self/setgroups", "deny"), "/proc/self/setgroups");
    snprintf(map, sizeof map, "%u 0 1\n", cfg.uid);
    CHECK(write_file("/proc/self/uid_map", map), "/proc/self/uid_map");
    snprintf(map, sizeof map, "%u 0 1\n", cfg.gid);
    CHECK(write_file("/proc/self/gid_map", map), "/proc/self/gid_map");
    return 0;
}

/* First steps, as root: cgroup, session, cgroup namespace, identity namespace (rootless). */
static int run_setup(const int *procs, int nprocs, int in_cgroup) {
    for (int i = 0; i < nprocs; i++) {
        CHECK(write_all(procs[i], "0", 1), "joining the run's cgroup");
        close(procs[i]);
    }
    CHECK(setsid(), "setsid");
    if ((nprocs || in_cgroup) && !cfg.rootless)
        CHECK(unshare(CLONE_NEWCGROUP), "unshare(CLONE_NEWCGROUP)");
    write_file("/proc/self/oom_score_adj", "0"); /* best effort */
    if (cfg.rootless && enter_run_user_namespace() < 0) return -1;
    return 0;
}

static int apply_rlimits(const struct request *req) {
    for (uint32_t i = 0; i < req->nlimits; i++) {
        struct rlimit rl = {req->limits[i].soft, req->limits[i].hard};
        CHECK(setrlimit((int)req->limits[i].res, &rl), "setrlimit");
    }
    return 0;
}

/* Whether an unprivileged (prepared) run process can set these: none above a hard limit. */
static int lowerable(const struct request *req) {
    for (uint32_t i = 0; i < req->nlimits; i++) {
        struct rlimit cur;
        if (getrlimit((int)req->limits[i].res, &cur) < 0) return 0;
        uint64_t hard = req->limits[i].hard;
        if (cur.rlim_max != RLIM_INFINITY && (hard == RLIM_INFINITY || hard > cur.rlim_max))
            return 0;
    }
    return 1;
}

/* Last steps: stdin /dev/null, stdout/stderr, only fds 0-2 (and the close-on-exec set-up
 * pipe, whose EOF tells pid 1 that exec worked), seccomp unless already filtered, execve. */
static void run_exec(const struct request *req, int filtered) {
    int setup_w = req->fds[2];
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull < 0) report(setup_w, "exec", "/dev/null: %s", strerror(errno));
    if (devnull != 0) {
        dup2(devnull, 0);
        close(devnull);
    }
    if (dup2(req->fds[0], 1) < 0 || dup2(req->fds[1], 2) < 0)
        report(setup_w, "exec", "dup2: %s", strerror(errno));
    if (fcntl(setup_w, F_SETFD, FD_CLOEXEC) < 0)
        report(setup_w, "exec", "fcntl: %s", strerror(errno));
    if (setup_w > 3) syscall(SYS_close_range, 3, setup_w - 1, 0);
    syscall(SYS_close_range, setup_w + 1, ~0U, 0);
    if (!filtered && install_filter() < 0) report(setup_w, "exec", "%s", why());
    execve(req->exec_path, req->argv, req->envp);
    report(setup_w, "exec", "%s: %s", strerror(errno), req->exec_path);
}

/* A run process forked for this request (no prepared one, or it cannot be used). */
static int join_session_keyring(void) {
    CHECK(syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, NULL), "keyctl(JOIN_SESSION_KEYRING)");
    return 0;
}

/* Close every descriptor from 3 up except ``a`` < ``b``. */
static void close_all_but(int a, int b) {
    if (a > 3) syscall(SYS_close_range, 3, a - 1, 0);
    if (b > a + 1) syscall(SYS_close_range, a + 1, b - 1, 0);
    syscall(SYS_close_range, b + 1, ~0U, 0);
}

static void fresh_run(const struct request *req) {
    if (run_setup(req->fds + 4, req->nfds - 4, req->in_cgroup) < 0 || apply_rlimits(req) < 0 ||
        drop_privileges(RUN_PROCESS) < 0 || join_session_keyring() < 0)
        report(req->fds[2], "exec", "%s", why());
    run_exec(req, 0);
}

/* A run process prepared ahead of its request, in a pid 1 that already sits in the run's
 * (pooled) cgroup: session, privileges dropped, fresh keyring, filter installed; then it
 * waits on ``sock`` for its part of the request (rlimits, command, descriptors). */
static void warm_run(int sock, int exec_w) {
    close_all_but(sock < exec_w ? sock : exec_w, sock < exec_w ? exec_w : sock);
    if (run_setup(NULL, 0, 1) < 0 || drop_privileges(RUN_PROCESS) < 0 ||
        join_session_keyring() < 0 || chdir(cfg.workdir) < 0 || install_filter() < 0)
        _exit(EXIT_SETUP_FAILED);
    struct request req = {0};
    int got = receive(sock, &req);
    if (got == 0) _exit(0); /* discarded: nothing ran */
    if (got < 0) _exit(EXIT_SETUP_FAILED);
    /* Again, now that the request's file view is mounted: the first chdir was into the
     * workdir as built, and a view that re-binds the workdir itself stacks a new mount on
     * it, which only a new lookup reaches. */
    if (chdir(cfg.workdir) < 0) report(req.fds[2], "exec", "%s: %s", cfg.workdir, strerror(errno));
    if (apply_rlimits(&req) < 0) report(req.fds[2], "exec", "%s", why());
    run_exec(&req, 1);
}

struct prepared {
    pid_t pid;
    int sock, exec_r;
};

static int prepare_run(struct prepared *out) {
    int sv[2], ex[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), "socketpair");
    CHECK(pipe2(ex, O_CLOEXEC), "pipe2");
    pid_t pid = fork();
    CHECK(pid, "fork");
    if (pid == 0) {
        close(ex[0]);
        close(sv[0]);
        warm_run(sv[1], ex[1]);
    }
    close(ex[1]);
    close(sv[1]);
    out->pid = pid;
    out->sock = sv[0];
    out->exec_r = ex[0];
    return 0;
}

/* pid 1 -> prepared run process: the body up to the script, with stdout, stderr, set-up. */
static int hand_over(const struct prepared *run, const struct request *req) {
    uint32_t len = (uint32_t)req->run_part;
    char control[CMSG_SPACE(3 * sizeof(int))];
    memset(control, 0, sizeof control);
    struct iovec iov = {&len, sizeof len};
    struct msghdr msg = {0};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(3 * sizeof(int));
    memcpy(CMSG_DATA(cm), req->fds, 3 * sizeof(int));
    if (sendmsg(run->sock, &msg, MSG_NOSIGNAL) != sizeof len) return -1;
    const uint8_t *p = req->body;
    size_t n = req->run_part;
    while (n) {
        ssize_t w = send(run->sock, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* ------------------------------------------------------------------ pid 1 ---------------- */

static int mkdirs(const char *dir) {
    static char path[4096];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1;; p++) {
        if (*p == '/' || *p == 0) {
            char saved = *p;
            *p = 0;
            if (mkdir(path, 0755) < 0 && errno != EEXIST) return fail(path);
            *p = saved;
            if (!saved) return 0;
        }
    }
}

/* The request's part of the root: the script's copy into /run/roboz/, the file view, then
 * the root tmpfs read-only. */
static int finish_root(const struct request *req) {
    if (req->script_path && req->script_path[0]) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", req->script_path);
        char *slash = strrchr(dir, '/');
        if (slash && slash != dir) {
            *slash = 0;
            if (mkdirs(dir) < 0) return -1;
        }
        int fd = open(req->script_path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0555);
        if (fd < 0) return fail(req->script_path);
        int bad = write_all(fd, req->script, req->script_len);
        close(fd);
        if (bad) return fail(req->script_path);
    }
    /* The file view goes on now, per request, not when a warm pid 1 was built: globs are
     * resolved when the run starts, and each path is checked against the inode the helper
     * resolved (a rename racing the start fails the run rather than mask the wrong file). */
    if (req->nview && apply_view(req->view, req->nview) < 0) return -1;
    struct mount_attr_arg attr = {MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0, 0, 0};
    CHECK(syscall(SYS_mount_setattr, AT_FDCWD, "/", 0, &attr, sizeof attr), "mount_setattr");
    CHECK(chdir(cfg.workdir), cfg.workdir);
    return 0;
}

/* Reap every orphan; return the main process's wait status. */
static int reap_until(pid_t main_pid) {
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, 0);
        if (pid < 0 && errno == EINTR) continue;
        if (pid < 0) return 0x7F00; /* no children at all: should not happen */
        if (pid == main_pid) return status;
    }
}

/* Once the main process has ended: SIGKILL every other process of the namespace and reap
 * them all (each is pid 1's child by then, so ECHILD means nothing of the run is left). */
static void kill_and_reap_the_rest(void) {
    kill(-1, SIGKILL);
    for (;;) {
        pid_t pid = waitpid(-1, NULL, 0);
        if (pid < 0 && errno == EINTR) continue;
        if (pid < 0) return;
    }
}

static void run_init(struct request *req, struct prepared *warm) {
    int setup_w = req->fds[2], status_w = req->fds[3];
    if (finish_root(req) < 0) report(setup_w, "init", "%s", why());
    pid_t pid = -1;
    int exec_r = -1;
    if (warm) {
        /* The prepared run process needs no cgroup join: only when pid 1 is already in the
         * run's cgroup can it be used; otherwise it is killed and a fresh one forked. */
        if (req->in_cgroup && lowerable(req) && hand_over(warm, req) == 0) {
            pid = warm->pid;
            exec_r = warm->exec_r;
        } else {
            kill(warm->pid, SIGKILL);
            close(warm->exec_r);
        }
        close(warm->sock);
    }
    if (pid < 0) {
        int ex[2];
        if (pipe2(ex, O_CLOEXEC) < 0) report(setup_w, "init", "pipe2: %s", strerror(errno));
        pid = fork();
        if (pid < 0) report(setup_w, "init", "fork: %s", strerror(errno));
        if (pid == 0) {
            close(ex[0]);
            fresh_run(req);
        }
        close(ex[1]);
        exec_r = ex[0];
    }
    close(req->fds[0]);
    close(req->fds[1]);
    for (int i = 4; i < req->nfds; i++) close(req->fds[i]);
    /* Let the run process set itself up first (it closes exec_w at its exec): pid 1's own
     * privilege drop would otherwise delay the run. Until then pid 1 is root but not
     * dumpable, and signals from the run are ignored by an init without handlers; the run
     * has no capabilities and its filter forbids ptrace, so nothing it does reaches pid 1. */
    char byte;
    while (read(exec_r, &byte, 1) < 0 && errno == EINTR) {
    }
    close(exec_r);
    if (drop_privileges(PID1) < 0) report(setup_w, "init", "%s", why());
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
        report(setup_w, "init", "dumpable: %s", strerror(errno));
    if (install_filter() < 0) report(setup_w, "init", "%s", why());
    close(setup_w);
    int st = reap_until(pid);
    kill_and_reap_the_rest();
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    int64_t cpu_us = (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 +
                     ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
    int64_t peak = (int64_t)ru.ru_maxrss * 1024;
    uint8_t out[20];
    memcpy(out, &st, 4);
    memcpy(out + 4, &cpu_us, 8);
    memcpy(out + 12, &peak, 8);
    write_all(status_w, out, sizeof out);
    _exit(0);
}

/* A SOCK_SEQPACKET socket at descriptor 3 makes this the fork server (zygote mode), a stream
 * socket the starter of one pid 1 (direct mode); both in fork_server.c. The mode is not on
 * the command line, which every pid 1 forked from them inherits and the run can read (it must
 * be just "sandbox-init"). */
int main(void) {
    int type = 0;
    socklen_t len = sizeof type;
    if (getsockopt(CTRL_FD, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_SEQPACKET)
        return serve_forks();
    return start_direct();
}

/* Forked by the fork server or the starter, with descriptors 3-7 in place. */
int pid1_main(void) {
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); /* root's alone until the run has its own uid */
    prctl(PR_SET_NAME, "sandbox-init", 0, 0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    int flags = fcntl(ALIVE_FD, F_GETFL);
    char byte;
    if (flags < 0 || fcntl(ALIVE_FD, F_SETFL, flags | O_NONBLOCK) < 0 ||
        read(ALIVE_FD, &byte, 1) == 0)
        _exit(EXIT_SETUP_FAILED); /* the process that started us is gone */
    close(ALIVE_FD);
    if (read_config(CONFIG_FD) < 0) _exit(EXIT_SETUP_FAILED);
    /* A pid 1 built for its request reports set-up failures on the request's set-up pipe;
     * one prepared ahead of it just exits (the zygote then starts the run cold). */
    int report_fd = cfg.report ? REPORT_FD : -1;
    syscall(SYS_close_range, POOL_FD + cfg.npool, ~0U, 0);
    write_file("/proc/self/oom_score_adj", "-1000"); /* best effort: CAP_SYS_RESOURCE */
    if (prepare_root(&cfg.root) < 0) report(report_fd, "init", "%s", why());
    for (int i = 0; i < cfg.npool; i++) { /* into the pooled cgroup (slow on v1: ahead) */
        if (write_all(POOL_FD + i, "0", 1) < 0) report(report_fd, "init", "joining the pool");
        close(POOL_FD + i);
    }
    /* Before anything untrusted exists, the first two steps of drop_privileges: securebits
     * locked, bounding set empty (inherited by the run; pid 1 never execs again, so it loses
     * nothing). */
    if (lock_securebits() < 0 || drop_bounding_set() < 0)
        report(report_fd, "init", "%s", why());
    if (report_fd >= 0) close(report_fd);
    struct prepared warm;
    int have_warm = cfg.prepare_run && prepare_run(&warm) == 0;
    struct request req = {0};
    int got = receive(CTRL_FD, &req);
    if (got == 0) _exit(0); /* discarded (EOF): nothing ran; the kernel kills the prepared
                               run process with this pid 1 */
    if (got < 0 || req.nfds < 4) _exit(EXIT_SETUP_FAILED);
    close(CTRL_FD);
    run_init(&req, have_warm ? &warm : NULL);
    return 0;
}

/* In a child of the fork server (whose mount namespace keeps the template): the system
 * template from the layout in the configuration at ``config_fd``. 0, or why not as an errno
 * value. */
int template_main(int config_fd, int replace) {
    if (read_config(config_fd) < 0 || build_template(&cfg.root, replace) < 0)
        return failed_errno > 0 && failed_errno < 256 ? failed_errno : EINVAL;
    return 0;
}
