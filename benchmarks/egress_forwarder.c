#define _GNU_SOURCE /* accept4 */
/* bench_sandbox's floor for the egress proxy's download figure (benchmarks/egress.py): the
 * least a relay in user space can do. It listens on 127.0.0.1 (port chosen by the kernel,
 * printed), and for each connection, one at a time, connects to a fixed address and copies
 * both ways with poll(2) and a 256 KB buffer (the proxy's largest read), passing each EOF on.
 * No handshake, no name, no checks, no counting: what is left between it and a direct
 * download is the hop itself (one more TCP connection and a process to wake per chunk).
 *
 *     egress_forwarder ADDRESS PORT
 *
 * It ends with its parent (the benchmark), or on SIGTERM.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

static char buf[256 * 1024];

static int relay(int a, int b) {
    struct pollfd p[2] = {{.fd = a, .events = POLLIN}, {.fd = b, .events = POLLIN}};
    int open_ways = 2;
    while (open_ways > 0) {
        if (poll(p, 2, 60000) <= 0) return -1;
        for (int i = 0; i < 2; i++) {
            if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            int to = i == 0 ? b : a;
            ssize_t n = read(p[i].fd, buf, sizeof buf);
            if (n <= 0) {
                shutdown(to, SHUT_WR);
                p[i].fd = -1;
                open_ways--;
                continue;
            }
            for (ssize_t done = 0; done < n;) {
                ssize_t w = write(to, buf + done, (size_t)(n - done));
                if (w <= 0) return -1;
                done += w;
            }
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: egress_forwarder ADDRESS PORT\n");
        return 2;
    }
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
    struct sockaddr_in here = {.sin_family = AF_INET};
    socklen_t len = sizeof here;
    int one = 1, listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (inet_pton(AF_INET, argv[1], &to.sin_addr) != 1 ||
        inet_pton(AF_INET, "127.0.0.1", &here.sin_addr) != 1 || listener < 0 ||
        bind(listener, (struct sockaddr *)&here, sizeof here) != 0 || listen(listener, 8) != 0 ||
        getsockname(listener, (struct sockaddr *)&here, &len) != 0) {
        perror("egress_forwarder");
        return 1;
    }
    printf("%d\n", ntohs(here.sin_port));
    fflush(stdout);
    for (;;) {
        int run = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
        if (run < 0) continue;
        int remote = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (remote >= 0 && connect(remote, (struct sockaddr *)&to, sizeof to) == 0) {
            setsockopt(remote, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* as the proxy */
            relay(run, remote);
        }
        if (remote >= 0) close(remote);
        close(run);
    }
}
