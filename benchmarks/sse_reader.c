#define _GNU_SOURCE /* memmem */
/* bench_server's stream client reader (benchmarks/sse_clients.py): it reads the SSE streams
 * the benchmark opened, so that what the "read" row measures is the server and not a Python
 * reader sharing the machine's two cores with it. The benchmark connects each client and
 * sends its HTTP request itself, then hands the socket over (SCM_RIGHTS on the control
 * socket); this process only reads: one epoll over every socket, one recvmsg per ready
 * socket, each read kept with two times on CLOCK_MONOTONIC (when this process read it, and
 * when the kernel received it: SO_TIMESTAMPNS, CLOCK_REALTIME, moved by the offset of the two
 * clocks taken at start). Nothing is parsed here but the two markers the benchmark waits for;
 * at a client's close its reads and bytes go to a file that the benchmark parses, checks and
 * times exactly as it does its own reader's.
 *
 *     sse_reader CONTROL_FD DIRECTORY
 *
 * The control socket (SOCK_SEQPACKET, one message a command) takes
 *     "F ID" + a socket   read this client's socket
 *     "C ID"              close it, write DIRECTORY/ID, answer "X ID"
 *     "S"                 answer "S CPU_NS READS" (the CPU spent reading) and end
 * and carries "c ID" (the stream said ": connected") and "d ID" (its last delta, a
 * "user_turn" status, or the end of the stream) back. DIRECTORY/ID holds a u64 count N, N
 * records (i64 read_ns, i64 arrived_ns, u64 size) and the N reads' bytes, native order.
 * It ends when the control socket closes, on "S", or with its parent.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define ROOM (256 * 1024) /* free space a client's buffer has before each read */

typedef struct {
    int64_t read_ns, arrived_ns;
    uint64_t size;
} Read;

typedef struct {
    int fd, connected, done;
    char *data;
    size_t used, room;
    Read *reads;
    size_t count, slots;
} Client;

static Client **clients;
static size_t nclients;
static int control, poller;
static int64_t offset, dumping_ns;
static uint64_t total_reads;

static int64_t now(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void *grow(void *block, size_t size) {
    void *bigger = realloc(block, size);
    if (bigger == NULL) die("sse_reader: realloc");
    return bigger;
}

static void tell(char kind, unsigned long id) {
    char message[32];
    int size = snprintf(message, sizeof message, "%c %lu", kind, id);
    if (send(control, message, (size_t)size, 0) != size) die("sse_reader: send");
}

static void follow(unsigned long id, int fd) {
    if (id >= nclients) {
        size_t more = id + 64;
        clients = grow(clients, more * sizeof *clients);
        memset(clients + nclients, 0, (more - nclients) * sizeof *clients);
        nclients = more;
    }
    Client *client = calloc(1, sizeof *client);
    if (client == NULL) die("sse_reader: calloc");
    client->fd = fd;
    clients[id] = client;
    int one = 1;
    struct epoll_event event = {.events = EPOLLIN, .data.u64 = id + 1};
    if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one) != 0 ||
        epoll_ctl(poller, EPOLL_CTL_ADD, fd, &event) != 0)
        die("sse_reader: follow");
}

static void finish(unsigned long id, Client *client) {
    if (client->fd >= 0) {
        epoll_ctl(poller, EPOLL_CTL_DEL, client->fd, NULL);
        close(client->fd);
        client->fd = -1;
    }
    if (!client->done) {
        client->done = 1;
        tell('d', id);
    }
}

static void read_client(unsigned long id, Client *client) {
    if (client->room - client->used < ROOM) {
        client->room = client->used + 2 * ROOM;
        client->data = grow(client->data, client->room);
    }
    char ancillary[CMSG_SPACE(sizeof(struct timespec))];
    struct iovec into = {.iov_base = client->data + client->used, .iov_len = ROOM};
    struct msghdr message = {
        .msg_iov = &into, .msg_iovlen = 1, .msg_control = ancillary,
        .msg_controllen = sizeof ancillary};
    ssize_t size = recvmsg(client->fd, &message, MSG_DONTWAIT);
    int64_t read_ns = now(CLOCK_MONOTONIC);
    if (size < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (size <= 0) {
        finish(id, client);
        return;
    }
    int64_t arrived_ns = read_ns;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&message); c; c = CMSG_NXTHDR(&message, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
            struct timespec t;
            memcpy(&t, CMSG_DATA(c), sizeof t);
            arrived_ns = (int64_t)t.tv_sec * 1000000000 + t.tv_nsec - offset;
        }
    }
    if (client->count == client->slots) {
        client->slots = client->slots ? 2 * client->slots : 256;
        client->reads = grow(client->reads, client->slots * sizeof *client->reads);
    }
    client->reads[client->count++] = (Read){read_ns, arrived_ns, (uint64_t)size};
    total_reads++;
    /* The markers may straddle two reads: look from 32 bytes before this one. */
    size_t from = client->used > 32 ? client->used - 32 : 0;
    client->used += (size_t)size;
    const char *probe = client->data + from;
    size_t length = client->used - from;
    if (!client->done && memmem(probe, length, "\"status\":\"user_turn\"", 20)) {
        client->done = 1;
        tell('d', id);
    } else if (!client->connected && memmem(probe, length, ": connected", 11)) {
        client->connected = 1;
        tell('c', id);
    }
}

static void dump(unsigned long id, const char *directory) {
    int64_t started = now(CLOCK_PROCESS_CPUTIME_ID);
    Client *client = id < nclients ? clients[id] : NULL;
    if (client == NULL) {
        fprintf(stderr, "sse_reader: no client %lu\n", id);
        exit(1);
    }
    client->done = 1; /* closed by the benchmark: nothing more to tell */
    finish(id, client);
    char path[4096];
    snprintf(path, sizeof path, "%s/%lu", directory, id);
    FILE *out = fopen(path, "wb");
    uint64_t count = client->count;
    if (out == NULL || fwrite(&count, sizeof count, 1, out) != 1 ||
        fwrite(client->reads, sizeof *client->reads, count, out) != count ||
        fwrite(client->data, 1, client->used, out) != client->used || fclose(out) != 0)
        die("sse_reader: dump");
    free(client->data);
    free(client->reads);
    free(client);
    clients[id] = NULL;
    tell('X', id);
    dumping_ns += now(CLOCK_PROCESS_CPUTIME_ID) - started;
}

/* One command; 0 once told to stop or the benchmark is gone. */
static int command(const char *directory) {
    char text[64];
    char ancillary[CMSG_SPACE(sizeof(int))];
    struct iovec into = {.iov_base = text, .iov_len = sizeof text - 1};
    struct msghdr message = {
        .msg_iov = &into, .msg_iovlen = 1, .msg_control = ancillary,
        .msg_controllen = sizeof ancillary};
    ssize_t size = recvmsg(control, &message, MSG_CMSG_CLOEXEC);
    if (size <= 0) return 0;
    text[size] = 0;
    unsigned long id = strtoul(text + 1, NULL, 10);
    struct cmsghdr *c = CMSG_FIRSTHDR(&message);
    if (text[0] == 'F' && c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        int fd;
        memcpy(&fd, CMSG_DATA(c), sizeof fd);
        follow(id, fd);
    } else if (text[0] == 'C') {
        dump(id, directory);
    } else if (text[0] == 'S') {
        char answer[64];
        int64_t cpu = now(CLOCK_PROCESS_CPUTIME_ID) - dumping_ns;
        int length = snprintf(answer, sizeof answer, "S %lld %llu", (long long)cpu,
                              (unsigned long long)total_reads);
        send(control, answer, (size_t)length, 0);
        return 0;
    } else {
        fprintf(stderr, "sse_reader: bad command %s\n", text);
        exit(2);
    }
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: sse_reader CONTROL_FD DIRECTORY\n");
        return 2;
    }
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    control = atoi(argv[1]);
    offset = now(CLOCK_REALTIME) - now(CLOCK_MONOTONIC);
    poller = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event event = {.events = EPOLLIN, .data.u64 = 0};
    if (poller < 0 || epoll_ctl(poller, EPOLL_CTL_ADD, control, &event) != 0)
        die("sse_reader: epoll");
    struct epoll_event ready[256];
    for (;;) {
        int n = epoll_wait(poller, ready, 256, -1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) die("sse_reader: epoll_wait");
        for (int i = 0; i < n; i++) {
            uint64_t key = ready[i].data.u64;
            if (key == 0) {
                if (!command(argv[2])) return 0;
                continue;
            }
            /* A client closed by a command earlier in this batch is gone. */
            Client *client = key - 1 < nclients ? clients[key - 1] : NULL;
            if (client != NULL && client->fd >= 0) read_client((unsigned long)(key - 1), client);
        }
    }
}
