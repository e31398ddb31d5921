/* sandbox-init: what init.c (pid 1, the run process), init_root.c (the root, the template)
 * and fork_server.c share. The numbers below are also written in Python (init_wire.py,
 * spec.py, view.py, mounts.py): tests/sandbox/test_shared_constants.py reads both. */
#ifndef ROBOZ_SANDBOX_INIT_H
#define ROBOZ_SANDBOX_INIT_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

/* What older C libraries lack: the kernel's values (x86_64's system call table,
 * linux/mount.h). */
#ifndef SYS_open_tree
#define SYS_open_tree 428
#define SYS_move_mount 429
#define SYS_pidfd_open 434
#define SYS_close_range 436
#define SYS_mount_setattr 442
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#define MOVE_MOUNT_F_EMPTY_PATH 0x4
#define MOVE_MOUNT_T_EMPTY_PATH 0x40
#define MOUNT_ATTR_RDONLY 0x1
#define MOUNT_ATTR_NOSUID 0x2
#define MOUNT_ATTR_NODEV 0x4
#define MOUNT_ATTR_NOEXEC 0x8
#endif
#define AT_RECURSIVE_FLAG 0x8000

/* Descriptors of a starting pid 1 (see init.c), and its exit status when set-up fails. */
#define CTRL_FD 3
#define CONFIG_FD 4
#define ALIVE_FD 5
#define REPORT_FD 6
#define POOL_FD 7
#define EXIT_SETUP_FAILED 127
/* A run with an allowlist: the egress proxy's listening socket, made by pid 1 in the run's
 * network namespace and kept open here (above the pool's join files, POOL_FD + MAX_POOL) for
 * the helper to take a copy of with pidfd_getfd(2); the run process closes it at exec. */
#define PROXY_FD 16
#define PROXY_PORT 3128

/* The run's network (the configuration's network byte; spec.SandboxNetwork). */
#define NETWORK_NONE 0
#define NETWORK_LOOPBACK 1
#define NETWORK_PROXY 2

/* The configuration's first bytes (init_wire.encode_config, read_config in init.c). */
#define CONFIG_MAGIC "RZI2"

/* pid 1 from its start (init.c); the fork server's loop (fork_server.c); the system
 * template from a configuration (init.c: 0, or an errno value). */
int pid1_main(void);
int serve_forks(void);
int start_direct(void);
int template_main(int config_fd, int replace);

struct mount_attr_arg {
    uint64_t attr_set, attr_clr, propagation, userns_fd;
};

/* A failed step: what (a path, a call or a refusal) and errno (0: none); see why(). */
extern const char *failed_what;
extern int failed_errno;
int fail(const char *what);
/* A kernel control file (uid_map, oom_score_adj...) written in one write(2). */
int write_file(const char *path, const char *text);

#define CHECK(call, what)                                                                  \
    do {                                                                                   \
        if ((call) < 0) return fail(what);                                                 \
    } while (0)

struct link {
    char *path, *target;
};

struct bind_spec {
    char *path;
    uint64_t attrs;
};

/* spec.MountPlan plus the layout constants, as sent by init_wire.encode_config. */
struct root_plan {
    char *hostname;
    int network; /* NETWORK_NONE, NETWORK_LOOPBACK, NETWORK_PROXY */
    uint64_t root_size, tmp_size, tmp_inodes;
    uint64_t sys_attrs, dev_attrs, dev_dir_attrs;
    uint32_t nsymlinks, nsystem, nbinds, ndevices, ndev_links, nproc_ro;
    struct link *symlinks, *dev_links;
    struct bind_spec *system, *binds;
    char **devices, **proc_ro;
};

/* Namespaces (mount, net, ipc, uts), loopback and the proxy's listener, the root
 * filesystem, the hostname. */
int prepare_root(const struct root_plan *plan);
/* The zygote's system template at TEMPLATE_AT, in the fork server's mount namespace, from
 * the plan's system layout; template_ready says a pid 1 forked from the server may clone it
 * (set by the server, inherited by the fork; 0 in a pid 1 that was executed). */
#define TEMPLATE_AT "/dev/shm"
extern int template_ready;
int build_template(const struct root_plan *plan, int replace);

/* The run's file view (spec.ViewEntry, planned by view.py): what the file policy denies is
 * masked, what it makes read-only or writable is re-bound so, in the order given. */
#define VIEW_MASK 1
#define VIEW_READ_ONLY 2
#define VIEW_WRITABLE 3
#define VIEW_SKELETON 4       /* a directory that may not be read: replaced by an empty, */
#define VIEW_SKELETON_CHILD 5 /* mode-0711 one holding only its allowed children */
struct view_entry {
    uint32_t kind;
    char *path;
    uint64_t dev, ino;
};
int apply_view(const struct view_entry *entries, uint32_t n);

#endif
