/* A test driver for sandbox-init's own procedures (tests/sandbox/c_driver.py): the program's
 * sources are included whole, so a test exercises the very functions pid 1 and the fork
 * server run, not a copy of them. One command per process; it prints one line:
 *   ok <details>            the call succeeded
 *   error <errno> <text>    it failed (errno 0: a refusal of the procedure itself)
 *
 *   walk FD PATH                       walk(FD, PATH) of a bind source: dev and inode reached
 *   target FD PATH IS_DIR [DEV...]     walk(FD, PATH) of a mount point, creating what is
 *                                      missing only on the devices DEV... (our own tmpfs)
 *   drop UID GID ROOTLESS run|pid1     drop_privileges: the ids, capability sets,
 *                                      no_new_privs and securebits read back after it
 */
#define main sandbox_init_main
#include "init.c"
#undef main
#include "fork_server.c"
#include "init_root.c"

static int failed(void) {
    printf("error %d %s\n", failed_errno, why());
    return 1;
}

static int reached(int fd) {
    struct stat st;
    if (fd < 0) return failed();
    if (fstat(fd, &st) < 0) return printf("error %d fstat\n", errno), 1;
    printf("ok %llu %llu\n", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
    return 0;
}

static unsigned long long status_field(const char *status, const char *name) {
    const char *line = strstr(status, name);
    return line ? strtoull(line + strlen(name), NULL, 16) : ~0ULL;
}

int main(int argc, char **argv) {
    if (argc >= 4 && strcmp(argv[1], "walk") == 0)
        return reached(walk(atoi(argv[2]), argv[3], "follow", NULL, 0));
    if (argc >= 5 && strcmp(argv[1], "target") == 0) {
        struct devs devs = {{0}, 0};
        for (int i = 5; i < argc; i++) add_dev(&devs, (dev_t)strtoull(argv[i], NULL, 10));
        return reached(walk(atoi(argv[2]), argv[3], "mount over", &devs, atoi(argv[4])));
    }
    if (argc == 6 && strcmp(argv[1], "drop") == 0) {
        cfg.uid = (uint32_t)strtoul(argv[2], NULL, 10);
        cfg.gid = (uint32_t)strtoul(argv[3], NULL, 10);
        cfg.rootless = atoi(argv[4]);
        if (drop_privileges(strcmp(argv[5], "pid1") == 0 ? PID1 : RUN_PROCESS) < 0)
            return failed();
        char status[8192];
        int fd = open("/proc/self/status", O_RDONLY);
        ssize_t n = fd < 0 ? -1 : read(fd, status, sizeof status - 1);
        if (n <= 0) return printf("error %d /proc/self/status\n", errno), 1;
        status[n] = 0;
        uid_t r, e, s;
        gid_t rg, eg, sg;
        getresuid(&r, &e, &s);
        getresgid(&rg, &eg, &sg);
        printf("ok uid=%u,%u,%u gid=%u,%u,%u groups=%d caps=%llx,%llx,%llx,%llx,%llx "
               "no_new_privs=%d securebits=%d\n",
               r, e, s, rg, eg, sg, getgroups(0, NULL), status_field(status, "CapInh:"),
               status_field(status, "CapPrm:"), status_field(status, "CapEff:"),
               status_field(status, "CapBnd:"), status_field(status, "CapAmb:"),
               prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0), prctl(PR_GET_SECUREBITS, 0, 0, 0, 0));
        return 0;
    }
    fprintf(stderr, "usage: see the top of c_driver.c\n");
    return 2;
}
