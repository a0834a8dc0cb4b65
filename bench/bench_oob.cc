#include "bench_oob.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace pxn_tools {

void bench_fail(int code, const std::string &what)
{
    fprintf(stderr, "%s: %s\n", program_invocation_short_name, what.c_str());
    exit(code);
}

void bench_target_end(bool served)
{
    printf("%s: target %s\n", program_invocation_short_name,
           served ? "done" : "lost its initiator");
    fflush(stdout);
    /* quick_exit, not _exit: pxn's at_quick_exit handler removes the
     * process's registry files; neither runs UCX's teardown */
    quick_exit(served ? kBenchOk : kBenchTransfer);
}

bool io_all(int fd, void *buf, size_t len, bool out)
{
    for (char *p = static_cast<char*>(buf); len > 0;) {
        const ssize_t n = out ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
        if (n <= 0) {
            if ((n < 0) && (errno == EINTR)) {
                continue;
            }
            return false;
        }
        p   += n;
        len -= size_t(n);
    }
    return true;
}

void send_blob(int fd, const void *data, size_t len)
{
    uint32_t n = uint32_t(len);
    if (!io_all(fd, &n, sizeof(n), true) ||
        !io_all(fd, const_cast<void*>(data), n, true)) {
        bench_fail(kBenchSetup, "socket send failed");
    }
}

std::vector<uint8_t> recv_blob(int fd)
{
    uint32_t n = 0;
    std::vector<uint8_t> data;
    if (io_all(fd, &n, sizeof(n), false) && (n <= (1u << 20))) {
        data.resize(n);
        if (io_all(fd, data.data(), n, false)) {
            return data;
        }
    }
    bench_fail(kBenchSetup, "socket receive failed (peer gone?)");
}

int oob_socket(bool target, int port)
{
    sockaddr_in sa     = {};
    sa.sin_family      = AF_INET;
    sa.sin_port        = htons(uint16_t(port));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (; !target; usleep(20000)) {
        const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) {
            return fd;
        }
        close(fd);
    }
    const int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if ((bind(lfd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) ||
        (listen(lfd, 1) != 0)) {
        bench_fail(kBenchSetup, "listen on port " + std::to_string(port) + ": " +
                                strerror(errno));
    }
    printf("%s: target listening on port %d\n", program_invocation_short_name, port);
    fflush(stdout);
    int fd;
    while (((fd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC)) < 0) &&
           (errno == EINTR)) {
    }
    close(lfd);
    if (fd < 0) {
        bench_fail(kBenchSetup, std::string("accept: ") + strerror(errno));
    }
    return fd;
}

} // namespace pxn_tools
