/* runstat.c - runstat FILE COMMAND [ARG...]: runs COMMAND, waits for it and writes its own
 * resource use to FILE: "utime_us stime_us maxrss_kb\n"; exits with its status.
 *
 * For bench/run.py's scenario 1. Python cannot measure a child's max RSS itself: a child it
 * forks (or vforks) and execs keeps the larger of its own and the Python process's RSS in
 * ru_maxrss (the kernel carries the old image's high-water mark over exec). This small
 * process forks the command instead, so the carried-over mark is this one's (< 1 MiB).
 *
 * Build: cc -O2 -o runstat bench/runstat.c */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: runstat FILE COMMAND [ARG...]\n");
        return 125;
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("runstat: fork");
        return 125;
    }
    if (pid == 0) {
        execvp(argv[2], argv + 2);
        perror(argv[2]);
        _exit(127);
    }
    int st;
    struct rusage ru;
    while (wait4(pid, &st, 0, &ru) < 0)
        if (errno != EINTR) {
            perror("runstat: wait4");
            return 125;
        }
    FILE *f = fopen(argv[1], "w");
    if (!f || fprintf(f, "%lld %lld %ld\n",
                      (long long)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec,
                      (long long)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec,
                      ru.ru_maxrss) < 0 || fclose(f) != 0) {
        perror(argv[1]);
        return 125;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
