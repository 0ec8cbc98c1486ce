"""Signal a run at a known point instead of racing it by time (issue 26).

The library's stop points (src/core/test_point.c): a process started with
LA_TEST_STOP_AT=NAME[:N] stops itself (SIGSTOP) the N-th time it passes the point NAME
("study-cell", "synth-cell", "train-step", "ckpt-weights", ...). start_stopped() starts a
command that way and returns once it has stopped there; the test then looks at the files,
sends its signal and lets the process go on with resume(). The point is reached on any
machine, however fast or loaded: no poll, no sleep, no deadline decides where the signal
lands."""
import os
import signal
import subprocess
import tempfile
import time

# Only against a hang (a point never reached and a run that never ends): not a speed bound.
HANG_GUARD_S = 1800


class Stopped:
    """A child process stopped at its point (or already ended: stopped is then False)."""

    def __init__(self, p, stopped, err):
        self.p, self.stopped, self._err = p, stopped, err

    def resume(self, sig=None):
        """Send sig (if any) while stopped, then SIGCONT; wait; return (exit code, stderr)."""
        if self.stopped:
            if sig is not None:
                self.p.send_signal(sig)
            self.p.send_signal(signal.SIGCONT)
        self.p.wait(timeout=HANG_GUARD_S)
        self._err.seek(0)
        err = self._err.read().decode(errors="replace")
        self._err.close()
        return self.p.returncode, err


def start_stopped(cmd, point, env=None, **popen):
    """Start cmd with LA_TEST_STOP_AT=point and wait until it stops there or ends.

    stderr goes to a temporary file (a pipe nobody reads while we wait could fill and block
    the child before its point); SIGINT is reset to its default in the child (a test run
    started in the background by a shell without job control inherits it ignored)."""
    env = dict(os.environ if env is None else env, LA_TEST_STOP_AT=point)
    err = tempfile.TemporaryFile()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), **popen)
    t0 = time.monotonic()
    while True:
        pid, status = os.waitpid(p.pid, os.WUNTRACED | os.WNOHANG)
        if pid == p.pid:
            break
        if time.monotonic() - t0 > HANG_GUARD_S:
            p.kill()
            raise AssertionError(f"{cmd[:2]} neither stopped at {point} nor ended in {HANG_GUARD_S} s")
        time.sleep(0.01)
    if os.WIFSTOPPED(status):
        return Stopped(p, True, err)
    p.returncode = os.waitstatus_to_exitcode(status)  # reaped here: tell Popen
    return Stopped(p, False, err)
