/* How sandbox-init starts a run's pid 1 in a fresh pid namespace: its fork server (zygote
 * mode), and the starter of a single pid 1 (direct mode, start_direct at the end).
 *
 * The fork server: started once by the zygote, it forks every run's pid 1.
 *
 * Why: executing sandbox-init per run cost ~0.45 ms of CPU on these machines (the kernel's
 * exec plus the C library's start-up, whose CPU-feature probing traps to the hypervisor in a
 * VM), more than a tenth of a whole run. A fork of this small, idle process costs a sixth of
 * that, and the child starts exactly where an executed sandbox-init does: descriptors 3-7 as
 * init.c expects them, default signal dispositions, an empty signal mask, no environment, the
 * command line "sandbox-init" (the server's own: its mode comes from the type of descriptor 3,
 * see main in init.c). It makes a mount namespace of its own at start, a slave of the host's
 * (host mounts still show up in it, nothing mounted in it shows up outside), where it builds
 * the system template its pid 1s clone their /usr, /etc and /dev from (build_template in
 * init_root.c). It dies with the zygote (PDEATHSIG, and EOF on its socket).
 *
 * Protocol on descriptor 3, a SOCK_SEQPACKET socket whose other end only the zygote holds
 * (init_wire.ForkServer), one message each way:
 *   a pid 1:  u8 report (0 or 1), u8 npool, with SCM_RIGHTS [request socket, configuration,
 *             alive pipe, set-up pipe if report, npool pooled cgroup join files]
 *             reply: i32 pid, with SCM_RIGHTS [pidfd of it]; or i32 -errno and no descriptor
 *   template: u8 'T', u8 0, with SCM_RIGHTS [configuration]: the template (replacing the
 *             last one) from the configuration's system layout, built by a child (a
 *             configuration is parsed into memory nobody frees: the child's, gone with it);
 *             the pid 1s forked after a successful build clone it
 *             reply: i32 0, or i32 -errno
 * Anything else is answered -EINVAL. The server reaps its children (every pid 1) itself; the
 * zygote holds a pidfd of each.
 */
#include "init.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>

#define SERVER_FD 3
#define MAX_POOL 8
#define MAX_SPAWN_FDS (4 + MAX_POOL)
#define HIGH_FD 64 /* above every descriptor a pid 1 expects */
#define TEMPLATE_REQUEST 'T'

static int own_pidns = -1;
static int own_mountns;        /* the template may be built here */
static int template_attempted; /* a build may have left a mount at TEMPLATE_AT */

/* In the child: descriptors where an executed sandbox-init finds them, nothing else above 2. */
static void become_pid1(const int *fds, int report, int npool) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    int n = 3 + report + npool, high[MAX_SPAWN_FDS], targets[MAX_SPAWN_FDS];
    targets[0] = CTRL_FD;
    targets[1] = CONFIG_FD;
    targets[2] = ALIVE_FD;
    if (report) targets[3] = REPORT_FD;
    for (int i = 0; i < npool; i++) targets[3 + report + i] = POOL_FD + i;
    for (int i = 0; i < n; i++) /* copied above the targets first: no clobbering */
        if ((high[i] = fcntl(fds[i], F_DUPFD, HIGH_FD)) < 0) _exit(EXIT_SETUP_FAILED);
    for (int i = 0; i < n; i++)
        if (dup2(high[i], targets[i]) < 0) _exit(EXIT_SETUP_FAILED);
    if (!report) close(REPORT_FD); /* whatever the server had there */
    syscall(SYS_close_range, POOL_FD + npool, ~0U, 0);
    _exit(pid1_main());
}

/* A pid 1 in a fresh pid namespace: its pid (the pidfd in *pidfd), or -errno. */
static int32_t spawn(const int *fds, int report, int npool, int *pidfd) {
    if (unshare(CLONE_NEWPID) < 0) return -errno;
    pid_t pid = fork();
    if (pid == 0) become_pid1(fds, report, npool);
    int err = errno;
    /* Back in our own namespace, so that the next fork gets a fresh one again; a server that
     * cannot get back would give runs a shared namespace: it stops instead (the zygote starts
     * another). */
    if (setns(own_pidns, CLONE_NEWPID) < 0) _exit(1);
    if (pid < 0) return -err;
    *pidfd = (int)syscall(SYS_pidfd_open, pid, 0); /* not reaped before this: see serve_forks */
    if (*pidfd < 0) {
        err = errno;
        kill(pid, SIGKILL);
        return -err;
    }
    return pid;
}

/* The template, built in a child in this server's mount namespace: 0 or -errno. */
static int32_t build_template_in_child(int config_fd, int replace) {
    pid_t pid = fork();
    if (pid < 0) return -errno;
    if (pid == 0) _exit(template_main(config_fd, replace));
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return -errno;
    if (WIFEXITED(status)) return -WEXITSTATUS(status);
    return -EINVAL;
}

static void reply(int32_t answer, int pidfd) {
    char control[CMSG_SPACE(sizeof(int))];
    memset(control, 0, sizeof control);
    struct iovec iov = {&answer, sizeof answer};
    struct msghdr msg = {0};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (pidfd >= 0) {
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &pidfd, sizeof(int));
    }
    while (sendmsg(SERVER_FD, &msg, MSG_NOSIGNAL) < 0 && errno == EINTR) {
    }
}

/* One request: 1 served (or refused), 0 the zygote is gone. */
static int serve_one(void) {
    uint8_t head[2];
    char control[CMSG_SPACE(MAX_SPAWN_FDS * sizeof(int))];
    struct iovec iov = {head, sizeof head};
    struct msghdr msg = {0};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t r = recvmsg(SERVER_FD, &msg, MSG_CMSG_CLOEXEC);
    if (r < 0) return errno == EINTR || errno == EAGAIN;
    if (r == 0) return 0;
    int fds[MAX_SPAWN_FDS], nfds = 0;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
        int n = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        for (int i = 0; i < n; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
            if (nfds < MAX_SPAWN_FDS) fds[nfds++] = fd;
            else close(fd);
        }
    }
    int pidfd = -1;
    int32_t answer = -EINVAL;
    int whole = r == sizeof head && !(msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC));
    if (whole && head[0] <= 1 && head[1] <= MAX_POOL && nfds == 3 + head[0] + head[1])
        answer = spawn(fds, head[0], head[1], &pidfd);
    else if (whole && head[0] == TEMPLATE_REQUEST && head[1] == 0 && nfds == 1) {
        answer = own_mountns ? build_template_in_child(fds[0], template_attempted) : -EPERM;
        template_attempted = 1;
        template_ready = answer == 0;
    }
    for (int i = 0; i < nfds; i++) close(fds[i]);
    reply(answer, pidfd);
    if (pidfd >= 0) close(pidfd);
    return 1;
}

int serve_forks(void) {
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    prctl(PR_SET_NAME, "sandbox-forker", 0, 0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    own_pidns = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
    /* The template's namespace. Without it (refused here) runs bind every system path
     * themselves: a template request then fails, and the zygote stops asking. Slave, not
     * just a copy: the copies of shared mounts would carry our mounts back to the host. */
    own_mountns = unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) == 0;
    /* Children are reaped only between requests, so a pid is never recycled between its fork
     * and its pidfd_open. */
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);
    int sfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
    if (own_pidns < 0 || sfd < 0) return 1;
    for (;;) {
        struct pollfd p[2] = {{SERVER_FD, POLLIN, 0}, {sfd, POLLIN, 0}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR) continue;
            return 1;
        }
        if (p[1].revents) {
            struct signalfd_siginfo info;
            while (read(sfd, &info, sizeof info) > 0) {
            }
            while (waitpid(-1, NULL, WNOHANG) > 0) {
            }
        }
        if (p[0].revents && !serve_one()) return 0;
    }
}

/* ------------------------------------------------------------------ direct mode --------- */

#define STATUS_FD ALIVE_FD /* the starter's status pipe: where pid 1's alive pipe goes */

static void refuse_start(const char *what) {
    char text[300];
    snprintf(text, sizeof text, "setup: %s: %s", what, strerror(errno));
    ssize_t ignored = write(REPORT_FD, text, strlen(text));
    (void)ignored;
    _exit(EXIT_SETUP_FAILED);
}

/* Executed by the helper (no zygote: ROBOZ_SANDBOX_ZYGOTE=0, or a rootless helper) with the
 * request socket at 3, the configuration at 4, the run's status pipe at 5 and its set-up pipe
 * at 6: a pid namespace (rootless: with a user namespace mapping the helper's own uid and gid
 * to 0, so that pid 1 can make the others), pid 1 forked into it with the alive pipe at 5,
 * pid 1's pid written on the status pipe (the helper kills pid 1 by it), then pid 1 reaped.
 * The helper sends the request to pid 1 itself; it reaps the starter, and with it learns the
 * run's CPU time. */
int start_direct(void) {
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    syscall(SYS_close_range, REPORT_FD + 1, ~0U, 0);
    int status_w = fcntl(STATUS_FD, F_DUPFD_CLOEXEC, REPORT_FD + 1);
    if (status_w < 0) refuse_start("the status pipe");
    write_file("/proc/self/oom_score_adj", "-1000"); /* best effort: CAP_SYS_RESOURCE */
    uid_t uid = geteuid();
    gid_t gid = getegid();
    if (unshare(uid ? CLONE_NEWUSER | CLONE_NEWPID : CLONE_NEWPID) < 0) refuse_start("unshare");
    if (uid) { /* dumpable, or /proc/self is root's for a helper that dropped from root */
        char map[64];
        if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0) refuse_start("dumpable");
        if (write_file("/proc/self/setgroups", "deny") < 0) refuse_start("setgroups");
        snprintf(map, sizeof map, "0 %u 1\n", uid);
        if (write_file("/proc/self/uid_map", map) < 0) refuse_start("uid_map");
        snprintf(map, sizeof map, "0 %u 1\n", gid);
        if (write_file("/proc/self/gid_map", map) < 0) refuse_start("gid_map");
    }
    int alive[2];
    if (pipe2(alive, O_CLOEXEC) < 0) refuse_start("pipe2");
    pid_t pid = fork();
    if (pid < 0) refuse_start("fork");
    if (pid == 0) {
        if (dup2(alive[0], ALIVE_FD) < 0) _exit(EXIT_SETUP_FAILED);
        close(alive[1]);
        close(status_w);
        _exit(pid1_main());
    }
    close(alive[0]);
    for (int fd = CTRL_FD; fd <= REPORT_FD; fd++) close(fd);
    int32_t reported = pid;
    ssize_t ignored = write(status_w, &reported, sizeof reported);
    (void)ignored;
    close(status_w);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    return 0;
}
