"""Reading C++ text without a compiler: a *masked* copy of a source (comments,
and optionally the insides of string and character literals, blanked; newlines
kept), so offsets in the mask are offsets in the source and a brace or a name
in a comment never counts."""

from __future__ import annotations

import re

_RAW = re.compile(r'R"([^()\\\s]{0,16})\(')


def mask(text: str, strings: bool = True) -> str:
    """`text` with comments (and, with `strings`, literal contents) replaced by
    spaces, newlines kept."""
    out = list(text)
    i, n = 0, len(text)

    def blank(start: int, end: int) -> None:
        for k in range(start, end):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if c == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            blank(i, end)
            i = end
        elif c == "/" and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            blank(i, end)
            i = end
        elif c == "R" and (raw := _RAW.match(text, i)) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = ")" + raw.group(1) + '"'
            end = text.find(close, raw.end())
            end = n if end < 0 else end
            if strings:
                blank(raw.end(), end)
            i = end + len(close)
        elif c in "\"'":
            if c == "'" and i > 0 and (text[i - 1].isalnum()) and i + 1 < n and text[i + 1].isalnum():
                i += 1  # a digit separator (1'000'000), not a character literal
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            if strings:
                blank(i + 1, min(j, n))
            i = j + 1
        else:
            i += 1
    return "".join(out)


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1
