/* gnuplot.c -- run gnuplot (Debian gnuplot-nox) on a script written by the library or the
 * CLI: fork + execvp, never a shell. */
#include <errno.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/gnuplot.h"

int la_gnuplot_run(const char *prog, const char *dir, const char *script, const char *log) {
    if (!prog) prog = "gnuplot";
    pid_t pid = fork();
    if (pid < 0) return 127;
    if (pid == 0) {
        if (dir && chdir(dir) != 0) _exit(127);
        if (log) {
            int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0666);
            if (fd >= 0) {
                dup2(fd, 1);
                dup2(fd, 2);
                close(fd);
            }
        }
        execlp(prog, prog, script, (char *)NULL);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return 127;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 126;
}
