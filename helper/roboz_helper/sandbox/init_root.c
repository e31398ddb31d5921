/* sandbox-init, first part: the run's namespaces and root filesystem, and the zygote's system
 * template. This is the one place the sandbox's mounts are made (Python only plans them:
 * mounts.plan_mounts), and every mount goes through walk() and bind_into():
 *
 * 1. Every mount is made private (nothing propagates back to the host).
 * 2. A small tmpfs becomes the root (pivot_root); the old root stays reachable at /oldroot
 *    only until step 6 (the same scheme as bubblewrap).
 * 3. Each source is bound from /oldroot. Sources are opened component by component with
 *    O_PATH|O_NOFOLLOW (a symlink or "." / ".." anywhere in a source path is an error, so a
 *    path is resolved exactly once and cannot be redirected between the helper's check and
 *    the mount), cloned with open_tree(OPEN_TREE_CLONE|AT_RECURSIVE), given their attributes
 *    with mount_setattr while still detached (a read-only bind is never writable, not even for
 *    a moment, and the attributes apply to every submount, unlike MS_REMOUNT), then attached
 *    with move_mount onto a target opened the same way. Mount points are created only inside
 *    the sandbox's own tmpfs mounts, never inside a bound host directory.
 * 4. System directories (/usr, pieces of /etc, /bin, /lib*...) are read-only, nosuid, nodev;
 *    the workdir and writable paths read-write, nosuid, nodev; symlinked top-level
 *    directories (/bin -> usr/bin) are recreated as symlinks.
 * 5. /tmp is a size- and inode-limited tmpfs; /dev a tiny read-only tmpfs with null, zero,
 *    full, random and urandom bound in (no tty, no pts, no shm of the host: /dev/shm points
 *    into the private /tmp); /proc a fresh procfs of the run's pid namespace with /proc/sys
 *    and other kernel knobs bound read-only over themselves; /sys is absent.
 * 6. The old root is detached; the root tmpfs becomes read-only once pid 1 has put the
 *    script's copy into /run/roboz/ and applied the file view (finish_root in init.c).
 *
 * The system template (build_template) is steps 3-5's system part done once, in the fork
 * server's own mount namespace, so that a run clones /usr, /etc and /dev from it (three
 * open_tree calls) instead of binding some thirty paths. Failures set failed_what and
 * failed_errno (see init.h).
 */
#include "init.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>

#define OLDROOT "/oldroot"

static char message[700]; /* a refusal's text (no errno) */

static int refuse(const char *fmt, const char *a, const char *b) {
    snprintf(message, sizeof message, fmt, a, b);
    errno = 0;
    return fail(message);
}

static int mount_setattr_fd(int dirfd, const char *path, unsigned flags, uint64_t set) {
    struct mount_attr_arg attr = {set, 0, 0, 0};
    return (int)syscall(SYS_mount_setattr, dirfd, path, flags, &attr, sizeof attr);
}

/* ---------------------------------------------------------------- walking ---------------- */

#define MAX_DEVS 64
struct devs {
    dev_t dev[MAX_DEVS];
    int n;
};

static void add_dev(struct devs *d, dev_t dev) {
    if (d->n < MAX_DEVS) d->dev[d->n++] = dev;
}

static int own_dev(const struct devs *d, dev_t dev) {
    for (int i = 0; i < d->n; i++)
        if (d->dev[i] == dev) return 1;
    return 0;
}

/* ``path`` (absolute) under ``root_fd``, one component at a time, refusing "."/".." and
 * symlinks (``refused`` says what the symlink would have been used for); ``create`` (a mount
 * point's walk) makes missing components, only inside our own tmpfs mounts (``devs``), the
 * last one a file unless ``is_dir``. Without ``create`` a missing component fails (ENOENT). */
static int walk(int root_fd, const char *path, const char *refused, const struct devs *create,
                int is_dir) {
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", path);
    int fd = dup(root_fd);
    if (fd < 0) return fail("dup");
    char *save = NULL;
    for (char *part = strtok_r(copy, "/", &save); part; part = strtok_r(NULL, "/", &save)) {
        int last = save == NULL || *save == 0;
        if (strcmp(part, ".") == 0 || strcmp(part, "..") == 0) {
            close(fd);
            return refuse("path '%s' contains '%s'", path, part);
        }
        int nfd = openat(fd, part, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (nfd < 0 && errno == ENOENT && create) {
            struct stat st;
            if (fstat(fd, &st) < 0 || !own_dev(create, st.st_dev)) {
                close(fd);
                return refuse("mount point '%s' does not exist inside an earlier bind%s", path, "");
            }
            int made;
            if (last && !is_dir) {
                made = openat(fd, part, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0444);
                if (made >= 0) close(made);
            } else {
                made = mkdirat(fd, part, 0755);
            }
            if (made < 0) {
                int saved = errno;
                close(fd);
                errno = saved;
                return fail(path);
            }
            nfd = openat(fd, part, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        }
        int saved = errno;
        close(fd);
        if (nfd < 0) {
            errno = saved;
            return fail(path);
        }
        fd = nfd;
        struct stat st;
        if (fstat(fd, &st) < 0) return fail(path);
        if (S_ISLNK(st.st_mode)) {
            close(fd);
            return refuse("refusing to %s a symlink at '%s'", refused, path);
        }
    }
    return fd;
}

/* Clone ``src`` (under src_root), set ``attrs`` while detached, attach at ``dst`` (under
 * dst_root, created inside our own mounts if missing). */
static int bind_into(int src_root, int dst_root, const char *src, const char *dst, uint64_t attrs,
                const struct devs *devs, int recursive) {
    int src_fd = walk(src_root, src, "follow", NULL, 0);
    if (src_fd < 0) return -1;
    struct stat st;
    if (fstat(src_fd, &st) < 0) {
        close(src_fd);
        return fail(src);
    }
    int tree = (int)syscall(SYS_open_tree, src_fd, "",
                            OPEN_TREE_CLONE | O_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE_FLAG);
    int saved = errno;
    close(src_fd);
    errno = saved;
    if (tree < 0) return fail("open_tree");
    int rc = -1;
    if (mount_setattr_fd(tree, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE_FLAG : 0), attrs) <
        0) {
        fail("mount_setattr");
    } else {
        int dst_fd = walk(dst_root, dst, "mount over", devs, S_ISDIR(st.st_mode));
        if (dst_fd >= 0) {
            if (syscall(SYS_move_mount, tree, "", dst_fd, "",
                        MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                fail("move_mount");
            else
                rc = 0;
            close(dst_fd);
        }
    }
    close(tree);
    return rc;
}

static int make_symlink(int root_fd, const char *path, const char *target,
                        const struct devs *devs) {
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", path);
    char *slash = strrchr(parent, '/');
    if (!slash) return refuse("bad symlink path '%s'%s", path, "");
    const char *name = path + (slash - parent) + 1;
    if (slash == parent)
        parent[1] = 0;
    else
        *slash = 0;
    int pfd = walk(root_fd, parent, "mount over", devs, 1);
    if (pfd < 0) return -1;
    int rc = symlinkat(target, pfd, name);
    int saved = errno;
    close(pfd);
    errno = saved;
    return rc < 0 ? fail(path) : 0;
}

/* ---------------------------------------------------------------- the pieces ------------- */

/* A tiny tmpfs at ``dir`` (under root_fd, which is also where the path starts) with the
 * harmless devices of src_root's /dev bound in and the usual links; read-only at the end. */
static int build_dev(const struct root_plan *p, int src_root, int root_fd, const char *dir,
                     struct devs *devs) {
    CHECK(mkdir(dir, 0755), dir);
    CHECK(mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k"), dir);
    struct stat st;
    CHECK(stat(dir, &st), dir);
    add_dev(devs, st.st_dev);
    char src[300], dst[300];
    for (uint32_t i = 0; i < p->ndevices; i++) {
        snprintf(src, sizeof src, "/dev/%s", p->devices[i]);
        snprintf(dst, sizeof dst, "%s/%s", dir, p->devices[i]);
        if (bind_into(src_root, root_fd, src, dst, p->dev_attrs, devs, 1) < 0) return -1;
    }
    for (uint32_t i = 0; i < p->ndev_links; i++) {
        snprintf(dst, sizeof dst, "%s/%s", dir, p->dev_links[i].path);
        CHECK(symlink(p->dev_links[i].target, dst), dir);
    }
    CHECK(mount_setattr_fd(AT_FDCWD, dir, 0, p->dev_dir_attrs), dir);
    return 0;
}

/* A fresh procfs with the kernel knobs read-only. */
static int build_proc(const struct root_plan *p) {
    CHECK(mkdir("/proc", 0555), "/proc");
    CHECK(mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL), "/proc");
    char path[300];
    for (uint32_t i = 0; i < p->nproc_ro; i++) {
        snprintf(path, sizeof path, "/proc/%s", p->proc_ro[i]);
        int tree = (int)syscall(SYS_open_tree, AT_FDCWD, path,
                                OPEN_TREE_CLONE | O_CLOEXEC | AT_RECURSIVE_FLAG);
        if (tree < 0 && errno == ENOENT) continue;
        if (tree < 0) return fail(path);
        int bad = mount_setattr_fd(tree, "", AT_EMPTY_PATH | AT_RECURSIVE_FLAG,
                                   p->sys_attrs | MOUNT_ATTR_NOEXEC) < 0 ||
                  syscall(SYS_move_mount, tree, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH) < 0;
        int saved = errno;
        close(tree);
        errno = saved;
        if (bad) return fail(path);
    }
    return 0;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The system part from the zygote's prepared tree: one clone per top-level entry. */
static int clone_template(const struct root_plan *p, int old_fd, int root_fd,
                          struct devs *devs) {
    char where[4200];
    snprintf(where, sizeof where, OLDROOT TEMPLATE_AT);
    DIR *dir = opendir(where);
    if (!dir) return fail(where);
    char *names[64];
    int n = 0;
    for (struct dirent *e; (e = readdir(dir)) && n < 64;)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) names[n++] = strdup(e->d_name);
    closedir(dir);
    qsort(names, (size_t)n, sizeof *names, by_name);
    char src[4300], dst[300];
    for (int i = 0; i < n; i++) {
        int is_dev = strcmp(names[i], "dev") == 0;
        snprintf(src, sizeof src, TEMPLATE_AT "/%s", names[i]);
        snprintf(dst, sizeof dst, "/%s", names[i]);
        if (bind_into(old_fd, root_fd, src, dst, is_dev ? p->dev_dir_attrs : p->sys_attrs, devs,
                 !is_dev) < 0)
            return -1;
    }
    for (uint32_t i = 0; i < p->nsymlinks; i++) {
        const char *path = p->symlinks[i].path;
        if (strchr(path + 1, '/') == NULL && make_symlink(root_fd, path, p->symlinks[i].target,
                                                          devs) < 0)
            return -1;
    }
    return 0;
}

static int system_binds(const struct root_plan *p, int old_fd, int root_fd, struct devs *devs) {
    for (uint32_t i = 0; i < p->nsymlinks; i++)
        if (make_symlink(root_fd, p->symlinks[i].path, p->symlinks[i].target, devs) < 0)
            return -1;
    for (uint32_t i = 0; i < p->nsystem; i++)
        if (bind_into(old_fd, root_fd, p->system[i].path, p->system[i].path, p->system[i].attrs,
                 devs, 1) < 0)
            return -1;
    return build_dev(p, old_fd, root_fd, "/dev", devs);
}

/* Steps 1-6 (see the top of this file), in fresh mount+pid namespaces, with CAP_SYS_ADMIN
 * there. */
static int build_root(const struct root_plan *p) {
    char opts[200];
    CHECK(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), "making mounts private");
    snprintf(opts, sizeof opts, "mode=0755,size=%llu,nr_inodes=4096",
             (unsigned long long)p->root_size);
    CHECK(mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, opts), "root tmpfs");
    CHECK(chdir("/tmp"), "/tmp");
    CHECK(mkdir("oldroot", 0700), "oldroot");
    CHECK(syscall(SYS_pivot_root, ".", "oldroot"), "pivot_root");
    CHECK(chdir("/"), "/");
    int root_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    int old_fd = open(OLDROOT, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0 || old_fd < 0) return fail("opening the roots");
    struct devs devs = {{0}, 0};
    struct stat st;
    CHECK(fstat(root_fd, &st), "/");
    add_dev(&devs, st.st_dev);
    int rc = template_ready ? clone_template(p, old_fd, root_fd, &devs)
                            : system_binds(p, old_fd, root_fd, &devs);
    if (rc == 0) {
        /* /tmp first: a workdir below /tmp is then bound inside the private /tmp. */
        snprintf(opts, sizeof opts, "mode=1777,size=%llu,nr_inodes=%llu",
                 (unsigned long long)p->tmp_size, (unsigned long long)p->tmp_inodes);
        if (mkdir("/tmp", 01777) < 0 || mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
                                              opts) < 0 || stat("/tmp", &st) < 0)
            rc = fail("/tmp");
        else
            add_dev(&devs, st.st_dev);
    }
    for (uint32_t i = 0; rc == 0 && i < p->nbinds; i++)
        rc = bind_into(old_fd, root_fd, p->binds[i].path, p->binds[i].path, p->binds[i].attrs, &devs,
                  1);
    if (rc == 0) rc = build_proc(p);
    close(old_fd);
    close(root_fd);
    if (rc < 0) return -1;
    CHECK(umount2(OLDROOT, MNT_DETACH), "umount oldroot");
    CHECK(rmdir(OLDROOT), "rmdir oldroot");
    return 0;
}

/* lo up in the run's own network namespace (SIOCSIFFLAGS, as `ip link set lo up`). */
static int loopback_up(void) {
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) return fail("socket");
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
    int rc = ioctl(s, SIOCGIFFLAGS, &ifr);
    if (rc == 0) {
        ifr.ifr_flags |= IFF_UP;
        rc = ioctl(s, SIOCSIFFLAGS, &ifr);
    }
    int saved = errno;
    close(s);
    errno = saved;
    return rc < 0 ? fail("bringing lo up") : 0;
}

/* network = proxy: the egress proxy's door, 127.0.0.1:PROXY_PORT of the run's namespace,
 * listening before the run exists (so the run can never take the port first) and kept at
 * PROXY_FD, where the helper takes a copy of it (pidfd_getfd) and serves it from outside.
 * Made after the root is built: no descriptor of the build is open at PROXY_FD then, and
 * F_DUPFD_CLOEXEC never replaces one anyway. */
static int proxy_listener(void) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return fail("the proxy's socket");
    struct sockaddr_in at;
    memset(&at, 0, sizeof at);
    at.sin_family = AF_INET;
    at.sin_port = htons(PROXY_PORT);
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = -1;
    if (bind(s, (struct sockaddr *)&at, sizeof at) == 0 && listen(s, 128) == 0)
        fd = fcntl(s, F_DUPFD_CLOEXEC, PROXY_FD);
    int saved = errno;
    close(s);
    errno = saved;
    if (fd < 0) return fail("the proxy's listener on 127.0.0.1");
    if (fd != PROXY_FD) {
        close(fd);
        errno = EBUSY;
        return fail("the proxy's listener descriptor");
    }
    return 0;
}

/* sandbox/view.py's plan: each entry's path walked like a bind's (no symlink, no "..",
 * from the sandbox's own root), checked to be the inode the helper resolved, then masked
 * (a mode-0 empty directory or file of the root tmpfs, read-only) or re-bound read-only
 * (recursively) or writable (this mount only) over itself. */
#define MASK_DIR "/run/roboz/.masked-dir"
#define MASK_FILE "/run/roboz/.masked-file"
/* An entry's path, walked from the sandbox's root; the inode the helper resolved, or fail. */
static int view_open(int root_fd, const struct view_entry *e) {
    int fd = walk(root_fd, e->path, "follow", NULL, 0);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        close(fd);
        return fail(e->path);
    }
    if ((uint64_t)st.st_dev != e->dev || (uint64_t)st.st_ino != e->ino) {
        close(fd);
        return refuse("file policy: '%s' changed between its check and the run's start%s",
                      e->path, "");
    }
    return fd;
}

/* ``dir`` (fd) becomes an empty read-only directory, mode 0711 (enter, not list), holding
 * only the ``k`` children that follow ``e``: each cloned from where it is before the
 * skeleton covers it, then attached at its own name inside the skeleton. */
static int skeleton(int root_fd, int dir, const struct view_entry *e, uint32_t k) {
    static unsigned serial;
    int *trees = calloc(k + 1, sizeof *trees);
    if (!trees) return fail("calloc");
    int rc = 0;
    uint32_t made = 0;
    for (; rc == 0 && made < k; made++) {
        int cfd = view_open(root_fd, &e[1 + made]);
        if (cfd < 0) {
            rc = -1;
            break;
        }
        trees[made] = (int)syscall(SYS_open_tree, cfd, "",
                                   OPEN_TREE_CLONE | O_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE_FLAG);
        close(cfd);
        if (trees[made] < 0) rc = fail("open_tree (file view)");
    }
    char skel[64];
    snprintf(skel, sizeof skel, "/run/roboz/.skeleton-%u", serial++);
    if (rc == 0 && mkdir(skel, 0711) < 0) rc = fail(skel);
    int sfd = rc == 0 ? open(skel, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
    if (rc == 0 && sfd < 0) rc = fail(skel);
    for (uint32_t j = 0; rc == 0 && j < k; j++) {
        const char *name = strrchr(e[1 + j].path, '/');
        name = name ? name + 1 : e[1 + j].path;
        struct stat st;
        if (fstat(trees[j], &st) < 0) {
            rc = fail(e[1 + j].path);
        } else if (S_ISDIR(st.st_mode)) {
            if (mkdirat(sfd, name, 0) < 0) rc = fail(e[1 + j].path);
        } else {
            int f = openat(sfd, name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0);
            if (f < 0) rc = fail(e[1 + j].path);
            else close(f);
        }
    }
    if (sfd >= 0) close(sfd);
    if (rc == 0) {
        int tree = (int)syscall(SYS_open_tree, AT_FDCWD, skel, OPEN_TREE_CLONE | O_CLOEXEC);
        struct mount_attr_arg attr = {
            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, 0,
            0, 0};
        if (tree < 0)
            rc = fail("open_tree (file view)");
        else if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0 ||
                 syscall(SYS_move_mount, tree, "", dir, "",
                         MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
            rc = fail(e->path);
        if (tree >= 0) close(tree);
    }
    for (uint32_t j = 0; rc == 0 && j < k; j++) {
        int target = walk(root_fd, e[1 + j].path, "mount over", NULL, 0);
        if (target < 0) {
            rc = -1;
        } else {
            if (syscall(SYS_move_mount, trees[j], "", target, "",
                        MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                rc = fail(e[1 + j].path);
            close(target);
        }
    }
    for (uint32_t j = 0; j < made; j++)
        if (trees[j] >= 0) close(trees[j]);
    free(trees);
    return rc;
}

int apply_view(const struct view_entry *v, uint32_t n) {
    if ((mkdir("/run", 0755) < 0 && errno != EEXIST) ||
        (mkdir("/run/roboz", 0755) < 0 && errno != EEXIST))
        return fail("/run/roboz");
    if (mkdir(MASK_DIR, 0) < 0 && errno != EEXIST) return fail(MASK_DIR);
    int made = open(MASK_FILE, O_CREAT | O_WRONLY | O_CLOEXEC, 0);
    if (made < 0) return fail(MASK_FILE);
    close(made);
    int root_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0) return fail("/");
    int rc = 0;
    for (uint32_t i = 0; rc == 0 && i < n; i++) {
        int fd = view_open(root_fd, &v[i]);
        if (fd < 0) {
            rc = -1;
            break;
        }
        if (v[i].kind == VIEW_SKELETON) {
            uint32_t k = 0;
            while (i + 1 + k < n && v[i + 1 + k].kind == VIEW_SKELETON_CHILD) k++;
            rc = skeleton(root_fd, fd, &v[i], k);
            i += k;
            close(fd);
            continue;
        }
        int tree;
        struct mount_attr_arg attr = {MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0, 0, 0};
        unsigned flags = AT_EMPTY_PATH;
        if (v[i].kind == VIEW_MASK) {
            struct stat st;
            if (fstat(fd, &st) < 0) {
                close(fd);
                rc = fail(v[i].path);
                break;
            }
            tree = (int)syscall(SYS_open_tree, AT_FDCWD, S_ISDIR(st.st_mode) ? MASK_DIR : MASK_FILE,
                                OPEN_TREE_CLONE | O_CLOEXEC);
            attr.attr_set |= MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOEXEC;
        } else if (v[i].kind == VIEW_READ_ONLY || v[i].kind == VIEW_WRITABLE) {
            tree = (int)syscall(SYS_open_tree, fd, "",
                                OPEN_TREE_CLONE | O_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE_FLAG);
            if (v[i].kind == VIEW_READ_ONLY) {
                attr.attr_set |= MOUNT_ATTR_RDONLY;
                flags |= AT_RECURSIVE_FLAG; /* masks and binds below stay, all read-only */
            } else {
                attr.attr_clr = MOUNT_ATTR_RDONLY;
            }
        } else {
            close(fd);
            errno = 0;
            rc = fail("file view: unexpected entry kind");
            break;
        }
        if (tree < 0) {
            rc = fail("open_tree (file view)");
        } else {
            if (syscall(SYS_mount_setattr, tree, "", flags, &attr, sizeof attr) < 0)
                rc = fail("mount_setattr (file view)");
            else if (syscall(SYS_move_mount, tree, "", fd, "",
                             MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                rc = fail(v[i].path);
            close(tree);
        }
        close(fd);
    }
    close(root_fd);
    return rc;
}

int template_ready;

/* In the fork server's own mount namespace: the system part of every run's root at
 * TEMPLATE_AT (there only: never a bind source of a run), read-only: usr/ (and the other real
 * system directories), etc/ with only the allowed entries and their symlinks, dev/ with its
 * devices. ``replace``: an earlier build may be there, detached first (runs cloned from it
 * keep their copies). */
int build_template(const struct root_plan *p, int replace) {
    const char *where = TEMPLATE_AT;
    if (replace && umount2(where, MNT_DETACH) < 0 && errno != EINVAL) return fail(where);
    CHECK(mount("tmpfs", where, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k"), where);
    int root_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    int t_fd = open(where, O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct devs devs = {{0}, 0};
    struct stat st;
    int rc = root_fd < 0 || t_fd < 0 || fstat(t_fd, &st) < 0 ? fail(where) : 0;
    if (rc == 0) add_dev(&devs, st.st_dev);
    char etc[300], dev[300];
    snprintf(etc, sizeof etc, "%s/etc", where);
    snprintf(dev, sizeof dev, "%s/dev", where);
    if (rc == 0 && mkdir(etc, 0755) < 0) rc = fail(etc);
    for (uint32_t i = 0; rc == 0 && i < p->nsystem; i++)
        rc = bind_into(root_fd, t_fd, p->system[i].path, p->system[i].path, p->system[i].attrs,
                       &devs, 1);
    for (uint32_t i = 0; rc == 0 && i < p->nsymlinks; i++) /* top-level ones: per run */
        if (strchr(p->symlinks[i].path + 1, '/'))
            rc = make_symlink(t_fd, p->symlinks[i].path, p->symlinks[i].target, &devs);
    if (rc == 0) rc = build_dev(p, root_fd, root_fd, dev, &devs);
    if (root_fd >= 0) close(root_fd);
    if (t_fd >= 0) close(t_fd);
    if (rc < 0) return -1;
    CHECK(mount_setattr_fd(AT_FDCWD, where, 0, p->sys_attrs), where);
    return 0;
}

int prepare_root(const struct root_plan *p) {
    CHECK(unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), "unshare");
    if (p->network != NETWORK_NONE && loopback_up() < 0) return -1;
    if (build_root(p) < 0) return -1;
    if (p->network == NETWORK_PROXY && proxy_listener() < 0) return -1;
    CHECK(sethostname(p->hostname, strlen(p->hostname)), "sethostname");
    return 0;
}
