/*
 * envloop-launch: the first process of every trial command, in one exec.
 *
 *   envloop-launch [--cgroup PROCS_FILE]... [--rlimit NAME=VALUE]... [--uid UID]
 *                  [--parent PID] [--chdir DIR] [--setenv NAME=VALUE]... -- PROGRAM ARG...
 *
 * Joins each cgroup (writes "0" to its cgroup.procs), lowers the rlimits, and with --uid drops to
 * that uid and gid for good (no supplementary groups, every capability gone from every set, the
 * bounding set emptied), then execs PROGRAM by its absolute path. It replaces a `/bin/sh` prefix
 * followed by `setpriv`: two execs per command that cost more than the sandbox itself.
 *
 * With --parent (the worker that starts it), the command is killed when that process ends: the
 * parent-death signal is set after the drop (which clears it) and kept across the exec, and a
 * worker already gone by then (killed as it started the command) leaves the launch failed, the
 * program not run, instead of a command no one waits for.
 *
 * With --chdir or --setenv (a plain-mode command, which no sandbox gives its directory and
 * variables), after the drop it moves to DIR and execs PROGRAM with exactly the --setenv variables,
 * looked up on their PATH: what `env -i -C DIR NAME=VALUE... PROGRAM` did, one exec fewer.
 *
 * The worker starts it with a fixed environment in "/" (launch.py); it reads nothing a trial
 * controls. Exit status 126 says the launch itself failed, with one line on stderr (127: the
 * program of a --setenv launch is not on its PATH).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define LAUNCH_FAILED 126
#define COMMAND_NOT_FOUND 127

static int fail(const char *what, const char *detail) {
  fprintf(stderr, "envloop-launch: %s %s: %s\n", what, detail, strerror(errno));
  return LAUNCH_FAILED;
}

static int join_cgroup(const char *procs_file) {
  int fd = open(procs_file, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0 || write(fd, "0", 1) != 1) return fail("cannot join cgroup", procs_file);
  close(fd);
  return 0;
}

static int parse_number(const char *text, unsigned long long *value) {
  char *end = NULL;
  errno = 0;
  *value = strtoull(text, &end, 10);
  return errno != 0 || end == text || *end != '\0' || text[0] == '-';
}

static int lower_rlimit(const char *assignment) {
  static const struct {
    const char *name;
    int resource;
    int optional; /* a limit the kernel may refuse without the launch failing */
  } known[] = {
      {"RLIMIT_CORE", RLIMIT_CORE, 0},
      {"RLIMIT_FSIZE", RLIMIT_FSIZE, 0},
      {"RLIMIT_AS", RLIMIT_AS, 0},
      {"RLIMIT_NPROC", RLIMIT_NPROC, 1},
  };
  const char *equals = strchr(assignment, '=');
  unsigned long long value;
  if (equals == NULL || parse_number(equals + 1, &value)) {
    errno = EINVAL;
    return fail("bad rlimit", assignment);
  }
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
    if (strncmp(assignment, known[i].name, (size_t)(equals - assignment)) != 0 ||
        known[i].name[equals - assignment] != '\0')
      continue;
    struct rlimit limit = {(rlim_t)value, (rlim_t)value};
    if (setrlimit(known[i].resource, &limit) != 0 && !known[i].optional)
      return fail("cannot set", assignment);
    return 0;
  }
  errno = EINVAL;
  return fail("unknown rlimit", assignment);
}

static int drop_to(const char *uid_text) {
  unsigned long long number;
  if (parse_number(uid_text, &number) || number == 0 || number > 0xfffffffeULL) {
    errno = EINVAL;
    return fail("bad uid", uid_text);
  }
  uid_t uid = (uid_t)number;
  /* Emptying the bounding set needs CAP_SETPCAP, so it comes before the uid changes. */
  for (int cap = 0; cap <= CAP_LAST_CAP; cap++) {
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL)
      return fail("cannot drop capability from the bounding set", uid_text);
  }
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
    return fail("cannot clear ambient capabilities for", uid_text);
  struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
  if (syscall(SYS_capget, &header, data) != 0) return fail("cannot read capabilities for", uid_text);
  for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; i++) data[i].inheritable = 0;
  if (syscall(SYS_capset, &header, data) != 0)
    return fail("cannot clear inheritable capabilities for", uid_text);
  if (setgroups(0, NULL) != 0) return fail("cannot clear supplementary groups for", uid_text);
  if (setresgid(uid, uid, uid) != 0) return fail("cannot switch group to", uid_text);
  if (setresuid(uid, uid, uid) != 0) return fail("cannot switch user to", uid_text);
  /* Permitted and effective sets are empty now; a way back to root must not exist. */
  if (setresuid(0, 0, 0) == 0) {
    errno = EPERM;
    return fail("could switch back to root from", uid_text);
  }
  return 0;
}

static int die_with(const char *parent_text) {
  unsigned long long parent;
  if (parse_number(parent_text, &parent)) {
    errno = EINVAL;
    return fail("bad parent", parent_text);
  }
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) return fail("cannot follow parent", parent_text);
  if ((unsigned long long)getppid() != parent) {
    errno = ESRCH;
    return fail("gone before the command started: parent", parent_text);
  }
  return 0;
}

extern char **environ;

int main(int argc, char **argv) {
  const char *uid = NULL;
  const char *parent = NULL;
  const char *directory = NULL;
  char **variables = calloc((size_t)argc, sizeof *variables);
  size_t set = 0;
  if (variables == NULL) return fail("cannot allocate", "the environment");
  int i = 1;
  for (; i < argc && strcmp(argv[i], "--") != 0; i += 2) {
    if (i + 1 >= argc) {
      errno = EINVAL;
      return fail("missing value for", argv[i]);
    }
    int failed = 0;
    if (strcmp(argv[i], "--cgroup") == 0)
      failed = join_cgroup(argv[i + 1]);
    else if (strcmp(argv[i], "--rlimit") == 0)
      failed = lower_rlimit(argv[i + 1]);
    else if (strcmp(argv[i], "--uid") == 0)
      uid = argv[i + 1];
    else if (strcmp(argv[i], "--parent") == 0)
      parent = argv[i + 1];
    else if (strcmp(argv[i], "--chdir") == 0)
      directory = argv[i + 1];
    else if (strcmp(argv[i], "--setenv") == 0) {
      if (strchr(argv[i + 1], '=') == NULL || argv[i + 1][0] == '=') {
        errno = EINVAL;
        return fail("bad variable", argv[i + 1]);
      }
      variables[set++] = argv[i + 1];
    } else {
      errno = EINVAL;
      return fail("unknown option", argv[i]);
    }
    if (failed) return LAUNCH_FAILED;
  }
  int own_environment = directory != NULL || set > 0;
  if (i + 1 >= argc || (!own_environment && argv[i + 1][0] != '/')) {
    errno = EINVAL;
    return fail("no program to run", "(an absolute path must follow --)");
  }
  if (uid != NULL && drop_to(uid) != 0) return LAUNCH_FAILED;
  if (parent != NULL && die_with(parent) != 0) return LAUNCH_FAILED;
  if (!own_environment) {
    execv(argv[i + 1], argv + i + 1);
    return fail("cannot run", argv[i + 1]);
  }
  if (directory != NULL && chdir(directory) != 0) return fail("cannot change directory to", directory);
  environ = variables; /* execvp looks PROGRAM up on these variables' PATH, as `env -i` does */
  execvp(argv[i + 1], argv + i + 1);
  int missing = errno == ENOENT;
  fail("cannot run", argv[i + 1]);
  return missing ? COMMAND_NOT_FOUND : LAUNCH_FAILED; /* the shell's codes, as `env` gives them */
}
