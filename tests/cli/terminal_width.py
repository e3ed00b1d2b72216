#!/usr/bin/env python3
"""Runs a dtlab command on a pseudo-terminal of a given width and checks that no line
it shows is wider than the terminal.

Usage: DTLAB=path/to/dtlab terminal_width.py COLUMNS OUTPUT -- ARG...

Runs `$DTLAB ARG...` on a pty of COLUMNS x 24 (ioctl TIOCSWINSZ; COLUMNS and LINES
are removed from its environment, so the command measures the terminal itself;
NO_COLOR passes through), answers every "Your prediction:" prompt with 3.5, and writes everything the
terminal showed to OUTPUT. A line is what lies between two line feeds or carriage
returns (a progress line redrawn in place counts each time it is drawn); ANSI escape
sequences are stripped before measuring, and a line is measured in characters
(UTF-8 code points). Fails (exit 1, naming the widest lines) when a line is wider
than COLUMNS or the command exits with another code than 0 or 1. Standard library
only.
"""
import fcntl
import os
import pty
import re
import select
import signal
import struct
import sys
import termios
import time

TOTAL_TIMEOUT_S = 300
ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


def main():
    dtlab = os.environ.get("DTLAB")
    if not dtlab or len(sys.argv) < 5 or sys.argv[3] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    columns, output, args = int(sys.argv[1]), sys.argv[2], sys.argv[4:]
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}

    pid, fd = pty.fork()
    if pid == 0:  # the child: the terminal is its stdin, stdout and stderr
        try:
            fcntl.ioctl(sys.stdout.fileno(), termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
            os.execve(dtlab, [dtlab] + args, env)
        finally:
            os._exit(127)

    seen = bytearray()
    answered = 0
    start = time.monotonic()
    problem = None
    while True:
        if ANSI.sub(b"", bytes(seen)).count(b"Your prediction:") > answered:
            os.write(fd, b"3.5\n")
            answered += 1
        if time.monotonic() - start > TOTAL_TIMEOUT_S:
            problem = f"the command did not end within {TOTAL_TIMEOUT_S} s"
            os.kill(pid, signal.SIGKILL)
            break
        ready, _, _ = select.select([fd], [], [], 0.2)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the child closed the terminal (it exited)
            chunk = b""
        if not chunk:
            break
        seen += chunk
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    with open(output, "wb") as f:
        f.write(bytes(seen))

    text = ANSI.sub(b"", bytes(seen)).decode("utf-8", "replace")
    lines = re.split(r"[\r\n]", text)
    wide = sorted((len(line), line) for line in lines if len(line) > columns)
    if problem is None and code not in (0, 1):
        problem = f"exit code {code}"
    if problem is None and wide:
        problem = f"{len(wide)} line(s) wider than {columns} columns, the widest {wide[-1][0]}"
    if problem is not None:
        print(f"FAIL: dtlab {' '.join(args)} on a {columns}-column terminal: {problem}", file=sys.stderr)
        for width, line in wide[-5:]:
            print(f"  {width:4d} | {line}", file=sys.stderr)
        return 1
    widest = max((len(line) for line in lines), default=0)
    print(f"ok: dtlab {' '.join(args)}: {len(lines)} lines, the widest {widest} of {columns} columns"
          f"{f', {answered} prediction(s) answered' if answered else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
