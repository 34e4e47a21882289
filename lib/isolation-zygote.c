/* isolation-zygote.c - process isolation: the process that forks the children.
 *
 * sluice_worker_start() forks it while the worker runs no thread of its
 * own; it keeps that state (the registry, the modules loaded) and forks
 * every child from it, so that a child replacing one that crashed starts
 * as clean as the first. It speaks to the worker over a SOCK_SEQPACKET
 * pair with fixed-size messages: SPAWN (the worker to the zygote, with the
 * child's ends of its two pipes attached by SCM_RIGHTS), SPAWNED (the pid,
 * or -errno) and EXITED (a pid and its wait status, for every child it
 * reaps). When the worker's end closes, it kills its children and exits.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/isolation-private.h"

static void
close_other_fds(int keep)
{
  g_autoptr(GDir) dir = g_dir_open("/proc/self/fd", 0, NULL);
  g_autoptr(GArray) fds = g_array_new(FALSE, FALSE, sizeof(int));
  const gchar *name;

  /* Collect first: closing while reading the directory would close its
   * own descriptor under it. Nothing of the worker's (its Redis
   * connections above all) may live on in a child. */
  while (dir != NULL && (name = g_dir_read_name(dir)) != NULL) {
    int fd = (int)g_ascii_strtoll(name, NULL, 10);
    if (fd > 2 && fd != keep)
      g_array_append_val(fds, fd);
  }
  g_clear_pointer(&dir, g_dir_close);
  for (guint i = 0; i < fds->len; i++)
    close(g_array_index(fds, int, i));
}

static void
send_message(int control, gchar kind, gint32 pid, gint32 status)
{
  SluiceZygoteMessage m = {kind, pid, status};
  ssize_t ignored = send(control, &m, sizeof m, MSG_NOSIGNAL);

  (void)ignored;
}

/* Receives SPAWN and its two descriptors. Returns 1 with them, 0 for a
 * message without them, -1 when the worker is gone. */
static int
receive_spawn(int control, int fds[2])
{
  SluiceZygoteMessage m;
  struct iovec iov = {&m, sizeof m};
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(2 * sizeof(int))];
  } cm;
  struct msghdr msg = {0};
  struct cmsghdr *c;
  ssize_t r;

  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = cm.buf;
  msg.msg_controllen = sizeof cm.buf;
  do
    r = recvmsg(control, &msg, MSG_CMSG_CLOEXEC);
  while (r < 0 && errno == EINTR);
  if (r <= 0)
    return -1;
  c = CMSG_FIRSTHDR(&msg);
  if (m.kind != 'S' || c == NULL || c->cmsg_type != SCM_RIGHTS ||
      c->cmsg_len != CMSG_LEN(2 * sizeof(int)))
    return 0;
  memcpy(fds, CMSG_DATA(c), 2 * sizeof(int));
  return 1;
}

G_GNUC_NORETURN static void
zygote_main(int control, SluiceRegistry *registry, guint64 data_limit)
{
  g_autoptr(GHashTable) children = g_hash_table_new(NULL, NULL);
  sigset_t chld;
  int sfd;

  close_other_fds(control);
  /* The worker decides when tasks stop; a terminal's Ctrl-C reaches the
   * whole process group. */
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, NULL);
  sfd = signalfd(-1, &chld, SFD_CLOEXEC);

  for (;;) {
    struct pollfd fds[2] = {{control, POLLIN, 0}, {sfd, POLLIN, 0}};

    if (poll(fds, 2, -1) < 0 && errno != EINTR)
      break;
    if (fds[1].revents & POLLIN) {
      struct signalfd_siginfo info;
      int status;
      pid_t pid;
      ssize_t ignored = read(sfd, &info, sizeof info);

      (void)ignored;
      while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        g_hash_table_remove(children, GINT_TO_POINTER(pid));
        send_message(control, 'X', pid, status);
      }
    }
    if (fds[0].revents != 0) {
      int pipes[2];
      int got = receive_spawn(control, pipes);
      pid_t pid;

      if (got < 0)
        break;
      if (got == 0)
        continue;
      pid = fork();
      if (pid == 0) {
        close(control);
        close(sfd);
        sluice_child__main(pipes[0], pipes[1], registry, data_limit);
      }
      close(pipes[0]);
      close(pipes[1]);
      if (pid > 0)
        g_hash_table_add(children, GINT_TO_POINTER(pid));
      send_message(control, 'P', pid > 0 ? pid : -errno, 0);
    }
  }
  /* The worker is gone: so are its tasks. */
  {
    GHashTableIter iter;
    gpointer key;
    g_hash_table_iter_init(&iter, children);
    while (g_hash_table_iter_next(&iter, &key, NULL))
      kill(GPOINTER_TO_INT(key), SIGKILL);
    while (waitpid(-1, NULL, 0) > 0)
      ;
  }
  _exit(0);
}

GPid
sluice_zygote__start(SluiceRegistry *registry, guint64 data_limit,
                     int *out_control, GError **error)
{
  int pair[2];
  pid_t pid;

  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    g_set_error(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_FAILED,
                "process isolation: cannot make a socket pair: %s",
                g_strerror(errno));
    return 0;
  }
  pid = fork();
  if (pid < 0) {
    g_set_error(error, SLUICE_WORKER_ERROR, SLUICE_WORKER_ERROR_FAILED,
                "process isolation: cannot fork the process that starts the "
                "worker's children: %s",
                g_strerror(errno));
    close(pair[0]);
    close(pair[1]);
    return 0;
  }
  if (pid == 0)
    zygote_main(pair[1], registry, data_limit);
  close(pair[1]);
  *out_control = pair[0];
  return pid;
}

gboolean
sluice_zygote__request_spawn(int control, int child_in, int child_out)
{
  SluiceZygoteMessage m = {'S', 0, 0};
  struct iovec iov = {&m, sizeof m};
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(2 * sizeof(int))];
  } cm;
  struct msghdr msg = {0};
  struct cmsghdr *c;
  int fds[2] = {child_in, child_out};

  memset(&cm, 0, sizeof cm);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = cm.buf;
  msg.msg_controllen = sizeof cm.buf;
  c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof fds);
  memcpy(CMSG_DATA(c), fds, sizeof fds);
  return sendmsg(control, &msg, MSG_NOSIGNAL) == (ssize_t)sizeof m;
}
