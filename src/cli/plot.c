/* plot.c -- run gnuplot on a script file written by a subcommand (gnuplot-nox, Debian). */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"

int cli_gnuplot(const char *script_path) {
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        /* no shell: the path is passed as one argument whatever characters it holds */
        execlp("gnuplot", "gnuplot", script_path, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    if (waitpid(pid, &st, 0) < 0) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
