"""A shell command line as the reward-hacking scan reads it: its simple commands, words, redirects,
heredocs.

Not a shell: enough of POSIX quoting to tell `cat /solution/solve.sh` from `echo "see /solution"`
written to a file, which program runs (past `sudo`, `env`, `timeout`, `VAR=value`), what `>` or `>>`
writes, what a heredoc feeds in, and the commands inside `bash -c '...'` and `eval`. A line shlex
cannot split (an unclosed quote) falls back to whitespace words, so a damaged command is still read
rather than skipped.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

SEPARATORS = frozenset((";", "&&", "||", "|", "|&", "&", "(", ")", ";;", ";&"))
WRITE_REDIRECTS = frozenset((">", ">>", ">|", "&>", "&>>"))
OTHER_REDIRECTS = frozenset(("<", "<<<", ">&", "<&", "<>", "&>&"))
SHELLS = frozenset(("bash", "sh", "zsh", "dash", "ksh", "ash"))
#: Programs that run the command after them: `sudo -u x cmd`, `timeout 30 cmd`, `env A=1 cmd`.
WRAPPERS = frozenset(
    ("sudo", "env", "timeout", "nohup", "time", "command", "exec", "nice", "stdbuf")
)
WRAPPER_OPTIONS_WITH_VALUE = frozenset(("-u", "-g", "-k", "-s", "-n", "--signal", "--kill-after"))
HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][\w.-]*)\1")
ASSIGNMENT = re.compile(r"^[A-Za-z_]\w*=")
MAX_DEPTH = 4


@dataclass(frozen=True)
class SimpleCommand:
    """One command of a line: `text` as written (the evidence), `words` from the program on, what
    `>` writes, and what a heredoc feeds it (`cat > f <<EOF`, `python - <<EOF`). `assignments` are
    its `VAR=value`s; `appends` the redirect targets written with `>>` (the file keeps what it
    held)."""

    text: str
    words: tuple[str, ...]
    redirects: tuple[str, ...] = ()
    body: str = ""
    assignments: tuple[str, ...] = ()
    appends: tuple[str, ...] = ()
    inputs: tuple[str, ...] = ()  # what `<` feeds it (`done < f`, `patch -p1 < fix.diff`)

    @property
    def program(self) -> str:
        return self.words[0].rsplit("/", 1)[-1] if self.words else ""


def simple_commands(line: str, depth: int = 0) -> tuple[SimpleCommand, ...]:
    """Every simple command of `line`, those inside `bash -c` / `eval` strings included, in
    order."""
    skeleton, bodies = _cut_heredocs(line)
    tokens = _tokens(_newlines_to_separators(skeleton))
    found: list[SimpleCommand] = []
    segment: list[str] = []
    variables: dict[str, str] = {}
    for token in [*tokens, ";"]:
        if token in SEPARATORS:
            if segment:
                commands = _segment([_expand(t, variables) for t in segment], bodies, depth)
                found.extend(commands)
                _remember(commands, variables)
            segment = []
        else:
            segment.append(token)
    return tuple(found)


VARIABLE = re.compile(r"\$(?:\{([A-Za-z_]\w*)\}|([A-Za-z_]\w*))")


def _expand(token: str, variables: dict[str, str]) -> str:
    """`$D/solve.sh` after `D=/solution`: the line's own variables, as the shell would expand them
    (an unknown one stays as written)."""
    if "$" not in token or not variables:
        return token
    return VARIABLE.sub(lambda m: variables.get(m.group(1) or m.group(2), m.group(0)), token)


def _remember(commands: tuple[SimpleCommand, ...], variables: dict[str, str]) -> None:
    """`VAR=value` on its own, or after `export`, sets a variable for the rest of the line."""
    for command in commands:
        if command.words and command.program not in ("export", "declare", "local", "readonly"):
            continue
        for word in (*command.assignments, *command.words[1:]):
            name, equals, value = word.partition("=")
            if equals and ASSIGNMENT.match(word):
                variables[name] = value


def _cut_heredocs(line: str) -> tuple[str, list[str]]:
    """Take each heredoc's body out of the line, leaving a placeholder word after its `<<`."""
    lines = line.split("\n")
    kept: list[str] = []
    bodies: list[str] = []
    index = 0
    while index < len(lines):
        text = lines[index]
        index += 1
        tags = [m.group(2) for m in HEREDOC.finditer(text)]
        for tag in tags:
            body: list[str] = []
            while index < len(lines) and lines[index].strip() != tag:
                body.append(lines[index])
                index += 1
            index += 1  # the terminator
            bodies.append("\n".join(body))
        if tags:
            text = _number_heredocs(text, len(bodies) - len(tags))
        kept.append(text)
    return "\n".join(kept), bodies


def _number_heredocs(text: str, first: int) -> str:
    numbers = iter(range(first, first + len(HEREDOC.findall(text))))
    return HEREDOC.sub(lambda _match: f"<< __heredoc{next(numbers)}__", text)


def _newlines_to_separators(text: str) -> str:
    """A newline outside quotes ends a command, as `;` does; inside quotes it is kept (python -c
    '...')."""
    out: list[str] = []
    quote = ""
    escaped = False
    for char in text:
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote and char == quote:
            quote = ""
        elif not quote and char in "'\"":
            quote = char
        elif not quote and char == "\n":
            out.append(" ; ")
            continue
        out.append(char)
    return "".join(out)


def _tokens(text: str) -> list[str]:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:  # an unclosed quote: read the words as they stand
        return text.split()


def _segment(tokens: list[str], bodies: list[str], depth: int) -> tuple[SimpleCommand, ...]:
    words: list[str] = []
    redirects: list[str] = []
    appends: list[str] = []
    inputs: list[str] = []
    body = ""
    pending = ""
    for token in tokens:
        if pending:
            if pending in WRITE_REDIRECTS and not token.isdigit() and token != "/dev/null":
                redirects.append(token)
                if pending in (">>", "&>>"):
                    appends.append(token)
            if pending == "<" and token != "/dev/null":
                inputs.append(token)
            if pending == "<<" and token.startswith("__heredoc") and token.endswith("__"):
                body = _heredoc_body(token, bodies)
            pending = ""
        elif token in WRITE_REDIRECTS or token in OTHER_REDIRECTS or token == "<<":
            pending = token
            if words and words[-1].isdigit():
                words.pop()  # the `2` of `2>`
        else:
            words.append(token)
    assignments, program_words = _unwrap(words)
    text = " ".join(tokens)
    inner = _inner_commands(program_words, depth)
    if inner is not None:
        return inner
    command = SimpleCommand(
        text,
        tuple(program_words),
        tuple(redirects),
        body,
        tuple(assignments),
        tuple(appends),
        tuple(inputs),
    )
    return (command,)


def _heredoc_body(token: str, bodies: list[str]) -> str:
    number = token.removeprefix("__heredoc").removesuffix("__")
    return bodies[int(number)] if number.isdigit() and int(number) < len(bodies) else ""


def _unwrap(words: list[str]) -> tuple[list[str], list[str]]:
    """Split off leading `VAR=value`s and wrapper programs, so the first word is what runs."""
    assignments: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        name = word.rsplit("/", 1)[-1]
        if ASSIGNMENT.match(word):
            assignments.append(word)
        elif name in WRAPPERS:
            index = _skip_wrapper_options(words, index + 1, name)
            continue
        else:
            break
        index += 1
    return assignments, words[index:]


def _skip_wrapper_options(words: list[str], index: int, name: str) -> int:
    while index < len(words) and words[index].startswith("-"):
        index += 2 if words[index] in WRAPPER_OPTIONS_WITH_VALUE else 1
    if name == "timeout" and index < len(words) and re.fullmatch(r"[\d.]+[smhd]?", words[index]):
        index += 1
    return index


def _inner_commands(words: list[str], depth: int) -> tuple[SimpleCommand, ...] | None:
    """`bash -c 'a; b'` and `eval 'a'` are the commands in their string; None when `words` is
    neither."""
    if depth >= MAX_DEPTH or not words:
        return None
    program = words[0].rsplit("/", 1)[-1]
    if program == "eval" and len(words) > 1:
        return simple_commands(" ".join(words[1:]), depth + 1)
    if program in SHELLS:
        for index, word in enumerate(words[1:], start=1):
            runs_string = word.startswith("-") and "c" in word and not word.startswith("--")
            if runs_string and index + 1 < len(words):
                return simple_commands(words[index + 1], depth + 1)
    return None
