#!/usr/bin/env python3
"""Writes strait(1), a man page, from the binary's own --help texts (scripts/deb runs it).

    scripts/manpage.py BINARY DATE > strait.1

The page is `strait --help`, then every command's and subcommand's --help, each a section,
re-flowed to fit 80 columns with their indentation kept (clap prints a command's summary on one
line), each help's Examples: section as it is. Nothing is written by hand but the name, the files and the pointers to the docs, so the
page says what the binary says.
"""

import re
import subprocess
import sys
import textwrap

WIDTH = 72  # man indents the text 7 columns: 79 in all


def help_text(binary, path):
    out = subprocess.run([binary, *path, "--help"], check=True, capture_output=True, text=True).stdout
    # The binary names itself by its file name; the page names it strait.
    return re.sub(r"^Usage: \S+", "Usage: strait", out, flags=re.M)


def commands(text):
    """Names in the help's Commands: list (help itself left out)."""
    names, inside = [], False
    for line in text.splitlines():
        if line.startswith("Commands:"):
            inside = True
        elif inside and not line.strip():
            break
        elif inside and re.match(r"^  \S", line):
            name = line.split()[0]
            if name != "help":
                names.append(name)
    return names


def hang_of(line):
    """Where a line's continuation lines start: under the description of a `  name   text`
    row, under the text of a `- item`, else under the line's own indentation."""
    row = re.match(r"^(\s+(?:\S.*?\S|\S)\s{2,})\S", line)
    item = re.match(r"^(\s*- )", line)
    return len((row or item).group(1)) if row or item else len(line) - len(line.lstrip())


def wrap(text):
    """The help re-flowed at WIDTH columns: a line that continues the one before (indented as
    that one's continuations are, and no new row or item) joins it, then each is wrapped with
    its hanging indentation. Some summaries are one long line, others wrapped by hand wider."""
    logical = []  # [text, hang] or None for a blank line; hang None: kept as it is
    examples = False
    for line in text.splitlines():
        stripped = line.strip()
        # The Examples: section is commands and their comments, one a line: none is joined to
        # the one before or wrapped (a command wrapped without its `\` would not run).
        if stripped == "Examples:":
            examples = True
        elif line and not line.startswith(" "):
            examples = False
        if examples and stripped:
            logical.append([line.rstrip(), None])
            continue
        if not stripped:
            logical.append(None)
            continue
        indent = len(line) - len(line.lstrip())
        prev = logical[-1] if logical and logical[-1] is not None and logical[-1][1] is not None else None
        starts_new = hang_of(line) != indent or stripped.startswith("- ")
        if prev is not None and indent == prev[1] and not starts_new:
            prev[0] += " " + stripped
            continue
        logical.append([line.rstrip(), hang_of(line)])
    lines = []
    for entry in logical:
        if entry is None:
            lines.append("")
            continue
        text, hang = entry
        if hang is None:
            lines.append(text)
            continue
        lines.extend(textwrap.wrap(text, WIDTH, subsequent_indent=" " * hang, break_on_hyphens=False,
                                   break_long_words=False, drop_whitespace=True) or [""])
    return "\n".join(lines)


def roff(text):
    """Literal text for a no-fill block: backslashes and leading dots or quotes escaped."""
    out = []
    for line in text.replace("\\", "\\e").splitlines():
        out.append("\\&" + line if line.startswith((".", "'")) else line)
    return "\n".join(out)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    binary, date = sys.argv[1:]
    version = subprocess.run([binary, "--version"], check=True, capture_output=True, text=True).stdout.strip()
    top = help_text(binary, [])
    summary = top.splitlines()[0].rstrip(".")
    page = [
        f'.TH STRAIT 1 "{date}" "{version}" "User Commands"',
        ".SH NAME",
        f"strait \\- {roff(summary[0].lower() + summary[1:])}",
        ".SH SYNOPSIS",
        ".B strait",
        "[\\fIOPTIONS\\fR] \\fICOMMAND\\fR",
        ".SH DESCRIPTION",
        ".nf",
        roff(wrap(top)),
        ".fi",
    ]
    queue = [[name] for name in commands(top)]
    while queue:
        path = queue.pop(0)
        text = help_text(binary, path)
        page += [f'.SH "STRAIT {" ".join(path).upper()}"', ".nf", roff(wrap(text)), ".fi"]
        queue[0:0] = [path + [name] for name in commands(text)]
    page += [
        ".SH FILES",
        ".TP",
        ".I /etc/strait/mm2.properties",
        "The configuration, a MirrorMaker 2 .properties file, read by the service.",
        ".TP",
        ".I /usr/lib/systemd/system/strait.service",
        "The service: \\fBsystemctl enable \\-\\-now strait\\fR starts it, "
        "\\fBsystemctl reload strait\\fR reads the file again.",
        ".SH SEE ALSO",
        "/usr/share/doc/strait/README.md and /usr/share/doc/strait/docs/ "
        "(configuration.md, check.md, deploying.md, failover.md).",
    ]
    print("\n".join(page))


if __name__ == "__main__":
    main()
