/* The template's per-call loop, in C (see template.py for the design and the pure-Python fallback).
 *
 * On this VM every page a forked process writes costs a copy-on-write fault, and fork write-protects
 * every page of the parent again each time. A loop in Python writes some 160 pages of the template
 * per call (reference counts of every object it touches, allocations in many pools) and the child's
 * set-up in Python writes another 150. Here the template's side writes a few pages of C stack and one
 * buffer, and the child comes back to Python with its descriptors and limits already in place.
 *
 * serve(sock_fd, pidns, resume=False, call_uid=0, pid_reset_fd=-1) -> (what, request, fds)
 *   Loops receiving requests on the SEQPACKET socket, forking a child per request, waiting for it with
 *   its wall-time limit, killing what it left and sending the report. It returns to Python only:
 *   - in a forked child: ("child", json_bytes, []) with fds 0..4 in place, all others closed, the
 *     call's rlimits set (and its own process group without a pid namespace);
 *   - in the template, for a request flagged NEED_PY (grader code to compile): ("prepare", request,
 *     fds); Python prepares and calls serve(sock_fd, pidns, True) to run it (the request waits in C).
 * The request buffer is wiped once a request has been forked, so no later child inherits it.
 * With pid_reset_fd (/proc/sys/kernel/ns_last_pid, opened by the template) "1" is written there before
 * each fork, so every call starts at pid 2 whatever earlier calls forked.
 * It never returns otherwise: when the zygote closes the socket the process exits.
 *
 * A request is a fixed little-endian header (struct req) followed by the marshal-encoded dict for the
 * Python side (template.pack).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAGIC 0x61726c31u /* "arl1" */
#define F_NEED_PY 1u
#define F_KILL 2u
#define F_CGROUP 4u /* the last descriptor is the calls' cgroup.procs: the child moves itself in */
#define MAX_FDS 8
#define CALL_FDS 5
#define FD_FLOOR 100
#define BUF_SIZE 65536

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

struct req {
    uint32_t magic, flags, timeout_ms, pad;
    uint64_t cpu_s, address_space, fsize, nproc;
};

static char buf[BUF_SIZE];

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static ssize_t recv_req(int sock, int *fds, int *nfds) {
    union { char raw[CMSG_SPACE(sizeof(int) * MAX_FDS)]; struct cmsghdr align; } ctrl;
    struct iovec iov = { buf, sizeof buf };
    struct msghdr msg = { 0 };
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctrl.raw;
    msg.msg_controllen = sizeof ctrl.raw;
    ssize_t n;
    do {
        n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    *nfds = 0;
    if (n < 0)
        return n;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (int i = 0; i < k; i++) {
                int fd;
                memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
                if (*nfds < MAX_FDS)
                    fds[(*nfds)++] = fd;
                else
                    close(fd);
            }
        }
    }
    return n;
}

static void close_all(int *fds, int nfds) {
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
}

/* In the child: descriptors to 0..4 (and 5: an opaque test's memfd, or a grader's own source), everything
 * else closed, the call's limits. */
struct caps_header { uint32_t version; int pid; };
struct caps_data { uint32_t effective, permitted, inheritable; };

/* The filter each child adds to the template's (sandbox/harden.child_seccomp_program), set by serve(). */
static unsigned char child_filter[4096];
static size_t child_filter_len;

static int child_setup(int *fds, int nfds, const struct req *r, int pidns, unsigned call_uid) {
    int high[CALL_FDS + 1];
    int keep = nfds > CALL_FDS ? CALL_FDS + 1 : CALL_FDS;
    for (int i = 0; i < keep; i++) {
        high[i] = fcntl(fds[i], F_DUPFD, FD_FLOOR);
        if (high[i] < 0)
            return -1;
    }
    for (int i = 0; i < keep; i++)
        if (dup2(high[i], i) < 0)
            return -1;
    if (syscall(SYS_close_range, keep, ~0U, 0) < 0)
        for (int fd = keep; fd < 1024; fd++)
            close(fd);
    struct { int res; uint64_t v; } lim[] = {
        { RLIMIT_CPU, r->cpu_s }, { RLIMIT_AS, r->address_space }, { RLIMIT_FSIZE, r->fsize },
        { RLIMIT_NPROC, r->nproc } };
    for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++) {
        struct rlimit rl = { (rlim_t)lim[i].v, (rlim_t)lim[i].v };
        if (setrlimit(lim[i].res, &rl) < 0)
            return -1;
    }
    if (!pidns && setpgid(0, 0) < 0)
        return -1;
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    if (sigprocmask(SIG_UNBLOCK, &chld, NULL) < 0)
        return -1;
    if (call_uid) { /* the calls' uid, and no capabilities left (the template kept CAP_SETUID, CAP_SETGID, CAP_KILL) */
        struct caps_header h = { 0x20080522, 0 };
        struct caps_data d[2];
        memset(d, 0, sizeof d);
        if (setresgid(call_uid, call_uid, call_uid) < 0 || setresuid(call_uid, call_uid, call_uid) < 0 ||
            syscall(SYS_capset, &h, d) < 0)
            return -1;
    }
    if (child_filter_len) {
        struct sock_fprog prog = { (unsigned short)(child_filter_len / 8), (struct sock_filter *)child_filter };
        if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
            return -1;
    }
    return 0;
}

/* SIGCHLD, blocked in the template and read from this signalfd: the template learns that its child exited
 * without a pidfd, so calls can be denied pidfd_open (a pidfd's inode number reads the machine-wide pidfs
 * counter). A child unblocks SIGCHLD before its call runs. */
static int chld_fd = -1;

static int chld_setup(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
        return -1;
    chld_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    return chld_fd < 0 ? -1 : 0;
}

static int exited(pid_t pid) { /* without reaping it */
    siginfo_t info;
    info.si_pid = 0;
    return waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid;
}

/* Wait for the child; kill it at the deadline or when the zygote says so; then sweep. */
static int watch(int sock, pid_t pid, uint32_t timeout_ms, int pidns, int *timed_out, int *killed) {
    double deadline = now_ms() + timeout_ms;
    *timed_out = *killed = 0;
    for (;;) {
        if (exited(pid))
            break;
        struct pollfd p[2] = { { chld_fd, POLLIN, 0 }, { sock, POLLIN, 0 } };
        int wait = -1;
        if (!*timed_out && !*killed) {
            double left = deadline - now_ms();
            if (left <= 0) {
                *timed_out = 1;
                kill(pid, SIGKILL);
            } else {
                wait = (int)left + 1;
            }
        }
        int n = poll(p, 2, wait);
        if (n < 0 && errno != EINTR)
            break;
        if (n <= 0)
            continue;
        if (p[0].revents) { /* some SIGCHLD (maybe a grandchild's): drain, then look at the child again */
            struct signalfd_siginfo si[8];
            while (read(chld_fd, si, sizeof si) > 0)
                ;
            continue;
        }
        if (p[1].revents) {
            char c[256];
            ssize_t k = recv(sock, c, sizeof c, 0);
            if (k == 0) { /* the zygote is gone */
                kill(pid, SIGKILL);
                _exit(0);
            }
            if (k > 0 && !*killed) {
                *killed = 1;
                kill(pid, SIGKILL);
            }
        }
    }
    if (!pidns)
        killpg(pid, SIGKILL); /* the (zombie, not yet reaped) child's group */
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (pidns) {
        /* Every process in this namespace but its init (us); the kernel fails a fork that races it. */
        if (kill(-1, SIGKILL) == 0 || errno != ESRCH)
            for (;;) {
                if (waitpid(-1, NULL, 0) < 0 && errno != EINTR)
                    break;
            }
    } else {
        while (waitpid(-1, NULL, WNOHANG) > 0)
            ;
    }
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return -WTERMSIG(status);
    return -1;
}

static PyObject *fds_list(int *fds, int nfds) {
    PyObject *list = PyList_New(nfds);
    if (!list)
        return NULL;
    for (int i = 0; i < nfds; i++)
        PyList_SET_ITEM(list, i, PyLong_FromLong(fds[i]));
    return list;
}

/* A request flagged NEED_PY waits here (in buf) while Python prepares it, then serve(sock, pidns, 1) runs
 * it: Python never keeps a reference to it across the calls that follow. */
static ssize_t pend_n;
static int pend_fds[MAX_FDS], pend_nfds;

static PyObject *serve(PyObject *self, PyObject *args) {
    (void)self;
    int sock, pidns, resume = 0, reset_fd = -1;
    unsigned call_uid = 0;
    const char *filter = NULL;
    Py_ssize_t filter_len = 0;
    if (!PyArg_ParseTuple(args, "ip|pIiy#", &sock, &pidns, &resume, &call_uid, &reset_fd, &filter, &filter_len))
        return NULL;
    if (filter_len > (Py_ssize_t)sizeof child_filter) {
        PyErr_SetString(PyExc_ValueError, "child seccomp filter too long");
        return NULL;
    }
    memcpy(child_filter, filter ? filter : "", (size_t)filter_len);
    child_filter_len = (size_t)filter_len;
    if (chld_fd < 0 && chld_setup() < 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    int fds[MAX_FDS], nfds = 0;
    ssize_t n = 0;
    int have_pending = 0;
    if (resume) {
        n = pend_n;
        nfds = pend_nfds;
        memcpy(fds, pend_fds, sizeof fds);
        pend_n = pend_nfds = 0;
        have_pending = 1;
    }
    for (;;) {
        if (!have_pending) {
            n = recv_req(sock, fds, &nfds);
            if (n == 0)
                _exit(0); /* the zygote closed the socket */
            if (n < 0)
                return PyErr_SetFromErrno(PyExc_OSError);
        }
        int resumed = have_pending;
        have_pending = 0;
        struct req r;
        if ((size_t)n < sizeof r) {
            close_all(fds, nfds);
            memset(buf, 0, BUF_SIZE);
            continue;
        }
        memcpy(&r, buf, sizeof r);
        if (r.magic != MAGIC || (r.flags & F_KILL) || nfds < CALL_FDS) { /* a stale kill, or malformed */
            close_all(fds, nfds);
            memset(buf, 0, (size_t)n);
            continue;
        }
        if ((r.flags & F_NEED_PY) && !resumed) {
            PyObject *list = fds_list(fds, nfds);
            if (!list)
                return NULL;
            pend_n = n;
            pend_nfds = nfds;
            memcpy(pend_fds, fds, sizeof fds);
            return Py_BuildValue("(sy#N)", "prepare", buf, (Py_ssize_t)n, list);
        }
        if (!pidns) /* what the zygote killed after the last call (see Zygote._kill_leftovers) */
            while (waitpid(-1, NULL, WNOHANG) > 0)
                ;
        pid_t pid;
        if (reset_fd >= 0 && pwrite(reset_fd, "1", 1, 0) != 1) {
            pid = -1; /* reported as a failed fork: the call is not run with a counter it could read */
        } else {
            pid = fork(); /* GIL held; the template is single-threaded */
        }
        if (pid == 0) {
            int ncall = nfds;
            if (r.flags & F_CGROUP) { /* out of the template's cgroup before anything of the call runs */
                ncall--;
                if (write(fds[ncall], "0", 1) != 1)
                    ncall = -1;
                close(fds[ncall < 0 ? nfds - 1 : ncall]);
            }
            if (ncall < CALL_FDS || child_setup(fds, ncall, &r, pidns, call_uid) < 0) {
                char msg[128];
                int len = snprintf(msg, sizeof msg, "sandbox child set-up failed: %s\n", strerror(errno));
                if (write(2, msg, len) < 0) {
                }
                _exit(121);
            }
            PyObject *out = Py_BuildValue("(sy#[])", "child", buf + sizeof r, (Py_ssize_t)(n - sizeof r));
            memset(buf, 0, (size_t)n);
            return out;
        }
        int saved = errno;
        memset(buf, 0, (size_t)n); /* no later child inherits this request */
        close_all(fds, nfds);
        char report[160];
        int len;
        if (pid < 0) {
            len = snprintf(report, sizeof report, "{\"error\": \"fork failed: %s\"}", strerror(saved));
        } else {
            int timed_out, killed;
            int code = watch(sock, pid, r.timeout_ms, pidns, &timed_out, &killed);
            len = snprintf(report, sizeof report, "{\"exit\": %d, \"timed_out\": %s, \"killed\": %s}", code,
                           timed_out ? "true" : "false", killed ? "true" : "false");
        }
        while (send(sock, report, len, 0) < 0 && errno == EINTR)
            ;
    }
}

static PyMethodDef methods[] = {
    { "serve", serve, METH_VARARGS, "Run the template's per-call loop; see the module source." },
    { NULL, NULL, 0, NULL },
};

static struct PyModuleDef module = { PyModuleDef_HEAD_INIT, "_forkserver", NULL, -1, methods, NULL, NULL, NULL, NULL };

PyMODINIT_FUNC PyInit__forkserver(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    if (PyModule_AddIntConstant(m, "MAGIC", MAGIC) < 0 || PyModule_AddIntConstant(m, "F_NEED_PY", F_NEED_PY) < 0 ||
        PyModule_AddIntConstant(m, "F_KILL", F_KILL) < 0 || PyModule_AddIntConstant(m, "F_CGROUP", F_CGROUP) < 0 ||
        PyModule_AddIntConstant(m, "HEADER_SIZE", sizeof(struct req)) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
