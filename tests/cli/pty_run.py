"""Runs a command on a pseudo-terminal (stdin, stdout and stderr all the pty) and
prints everything it wrote, carriage returns and escapes as they came; exits with
the command's exit code. Used by graceful_stop.sh to see what only a terminal
shows (the progress lines). Usage: pty_run.py COMMAND [ARG...]"""
import os
import pty
import sys

pid, fd = pty.fork()
if pid == 0:
    os.environ["COLUMNS"] = "80"
    os.execvp(sys.argv[1], sys.argv[1:])
chunks = []
while True:
    try:
        data = os.read(fd, 65536)
    except OSError:  # EIO: the child closed the terminal
        break
    if not data:
        break
    chunks.append(data)
_, status = os.waitpid(pid, 0)
sys.stdout.buffer.write(b"".join(chunks))
sys.exit(os.waitstatus_to_exitcode(status) & 0xFF)
