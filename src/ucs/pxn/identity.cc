#include "identity.h"

#include "os_resource.h"

#include <ucs/debug/log_def.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

namespace pxn {

namespace {

/* Reads a small file completely. Sets errno and returns false on failure. */
bool read_small_file(const char *path, char *buf, size_t size, size_t *length)
{
    UniqueFd fd(open(path, O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) {
        return false;
    }
    size_t total = 0;
    while (total + 1 < size) {
        const ssize_t n = read(fd.get(), buf + total, size - 1 - total);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return false;
        }
        if (n == 0) {
            break;
        }
        total += size_t(n);
    }
    buf[total] = '\0';
    *length    = total;
    return true;
}

bool parse_u64(const char *begin, const char *end, uint64_t *value)
{
    if (begin == end) {
        return false;
    }
    uint64_t v = 0;
    for (const char *p = begin; p != end; ++p) {
        if ((*p < '0') || (*p > '9')) {
            return false;
        }
        const uint64_t digit = uint64_t(*p - '0');
        if (v > (UINT64_MAX - digit) / 10) {
            return false;
        }
        v = v * 10 + digit;
    }
    *value = v;
    return true;
}

} // namespace

ucs_status_t node_identity(const std::string &override_id, std::string *node_id,
                           const char *boot_id_path)
{
    if (!override_id.empty()) {
        *node_id = override_id;
        return UCS_OK;
    }

    char   buf[128];
    size_t length = 0;
    if (!read_small_file(boot_id_path, buf, sizeof(buf), &length)) {
        ucs_error("pxn: cannot read the boot id from %s: %m (set "
                  "UCX_PXN_NODE_ID)", boot_id_path);
        return UCS_ERR_IO_ERROR;
    }
    while ((length > 0) && ((buf[length - 1] == '\n') || (buf[length - 1] == ' '))) {
        --length;
    }
    if (length == 0) {
        ucs_error("pxn: %s is empty (set UCX_PXN_NODE_ID)", boot_id_path);
        return UCS_ERR_IO_ERROR;
    }
    node_id->assign(buf, length);
    return UCS_OK;
}

bool parse_proc_stat(const char *text, size_t length, char *state,
                     uint64_t *start_time)
{
    /* comm is whatever the process named itself, ")" and spaces included;
     * the kernel prints it in parentheses, so only the last ')' is safe. */
    const char *end   = text + length;
    const char *close = nullptr;
    for (const char *p = text; p != end; ++p) {
        if (*p == ')') {
            close = p;
        }
    }
    if ((close == nullptr) || (end - close < 3) || (close[1] != ' ')) {
        return false;
    }

    /* Field 3 is the first after ") "; field 22 the 20th. */
    const char *p     = close + 2;
    int         field = 3;
    while (p < end) {
        const char *token_end = p;
        while ((token_end < end) && (*token_end != ' ') && (*token_end != '\n')) {
            ++token_end;
        }
        if (field == 3) {
            if (token_end - p != 1) {
                return false;
            }
            *state = *p;
        } else if (field == 22) {
            return parse_u64(p, token_end, start_time);
        }
        if ((token_end == end) || (*token_end == '\n')) {
            break;
        }
        p = token_end + 1;
        ++field;
    }
    return false;
}

namespace {

/* 1: running (state and start time set), 0: no such process, -1: cannot
 * tell (errno set). */
int read_proc_stat(pid_t pid, char *state, uint64_t *start_time)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/stat", int(pid));
    char   buf[1024];
    size_t length = 0;
    if (!read_small_file(path, buf, sizeof(buf), &length)) {
        return ((errno == ENOENT) || (errno == ESRCH)) ? 0 : -1;
    }
    if (!parse_proc_stat(buf, length, state, start_time)) {
        errno = EINVAL;
        return -1;
    }
    return 1;
}

bool is_dead_state(char state)
{
    return (state == 'Z') || (state == 'X') || (state == 'x');
}

} // namespace

ucs_status_t process_start_time(pid_t pid, uint64_t *start_time)
{
    char state = 0;
    const int rc = read_proc_stat(pid, &state, start_time);
    if (rc == 0) {
        return UCS_ERR_NO_ELEM;
    }
    if (rc < 0) {
        ucs_error("pxn: cannot read /proc/%d/stat: %m", int(pid));
        return UCS_ERR_IO_ERROR;
    }
    return is_dead_state(state) ? UCS_ERR_NO_ELEM : UCS_OK;
}

ucs_status_t random_epoch(uint64_t *epoch)
{
    uint64_t value = 0;
    while (value == 0) {
        const ssize_t n = getrandom(&value, sizeof(value), 0);
        if (n == ssize_t(sizeof(value))) {
            continue;
        }
        if ((n < 0) && (errno == EINTR)) {
            value = 0;
            continue;
        }
        ucs_error("pxn: getrandom failed: %m");
        return UCS_ERR_IO_ERROR;
    }
    *epoch = value;
    return UCS_OK;
}

ucs_status_t current_process(ProcessIdentity *identity)
{
    ProcessIdentity id;
    id.pid = uint32_t(getpid());
    ucs_status_t status = process_start_time(getpid(), &id.start_time);
    if (status == UCS_ERR_NO_ELEM) {
        ucs_error("pxn: /proc/%d/stat of this process is missing", int(getpid()));
        return UCS_ERR_IO_ERROR;
    } else if (status != UCS_OK) {
        return status;
    }
    status = random_epoch(&id.epoch);
    if (status != UCS_OK) {
        return status;
    }
    *identity = id;
    return UCS_OK;
}

bool is_alive(int64_t pid, uint64_t start_time)
{
    /* kill(0 or -1, 0) would address a process group or everyone. */
    if ((pid <= 0) || (pid > INT_MAX)) {
        return false;
    }
    if ((kill(pid_t(pid), 0) != 0) && (errno != EPERM)) {
        return false;
    }
    char     state   = 0;
    uint64_t started = 0;
    const int rc     = read_proc_stat(pid_t(pid), &state, &started);
    if (rc == 0) {
        return false;
    }
    if (rc < 0) {
        ucs_debug("pxn: cannot verify the start time of pid %d (%m): "
                  "assuming it is alive", int(pid));
        return true;
    }
    return !is_dead_state(state) && (started == start_time);
}

} // namespace pxn
