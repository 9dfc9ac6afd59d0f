"""A strict reader of the YAML the docs' Kubernetes manifests are written in (PyYAML is
not a dependency): block mappings and sequences (a sequence may sit at its key's
indentation, as kubectl writes them), plain and quoted one-line scalars, comments, and
documents separated by `---`. Anything else (flow collections, block scalars, anchors,
tags, a plain scalar YAML 1.1 would read as a bool or a float) is refused with its line,
so a manifest this reads is read the same way by kubectl."""
import re

KEY = re.compile(r'^([A-Za-z0-9_.\-/]+):(?:\s+(.*))?$')
INTEGER = re.compile(r'^-?(0|[1-9][0-9]*)$')
# Plain scalars YAML 1.1 (kubectl's reader) takes for something other than a string.
AMBIGUOUS = re.compile(r'^(y|n|yes|no|on|off|~|null|[-+]?(\d*\.\d+|\d+\.\d*)([eE][-+]?\d+)?'
                       r'|0[0-7]+|0x[0-9a-fA-F]+|\.inf|\.nan)$', re.I)


class YamlError(ValueError):
    pass


def load_all(text):
    """The documents of a manifest, as dicts, lists, str, int and bool."""
    documents, lines = [], []
    for number, raw in enumerate(text.splitlines(), 1):
        if raw.rstrip() == '---':
            documents.append(lines)
            lines = []
            continue
        if '\t' in raw[:len(raw) - len(raw.lstrip())]:
            raise YamlError(f'line {number}: a tab in the indentation')
        content = _strip_comment(raw, number).rstrip()
        if content.strip():
            lines.append((len(content) - len(content.lstrip()), content.strip(), number))
    documents.append(lines)
    return [_document(lines) for lines in documents if lines]


def _document(lines):
    value, end = _block(lines, 0, lines[0][0])
    if end != len(lines):
        raise YamlError(f'line {lines[end][2]}: unexpected indentation')
    return value


def _strip_comment(line, number):
    quote = None
    for index, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in '\'"' and (index == 0 or line[index - 1] in ' -:['):
            quote = char
        elif char == '#' and (index == 0 or line[index - 1] == ' '):
            return line[:index]
    if quote:
        raise YamlError(f'line {number}: an unclosed quote')
    return line


def _is_item(content):
    return content == '-' or content.startswith('- ')


def _block(lines, index, indent):
    if _is_item(lines[index][1]):
        return _sequence(lines, index, indent)
    return _mapping(lines, index, indent)


def _mapping(lines, index, indent):
    mapping = {}
    while index < len(lines) and lines[index][0] == indent and not _is_item(lines[index][1]):
        _, content, number = lines[index]
        match = KEY.match(content)
        if not match:
            raise YamlError(f'line {number}: not `key: value`: {content!r}')
        key, rest = match.groups()
        if key in mapping:
            raise YamlError(f'line {number}: key {key!r} twice')
        index += 1
        if rest:
            mapping[key] = _scalar(rest, number)
        elif index < len(lines) and (lines[index][0] > indent or (
                lines[index][0] == indent and _is_item(lines[index][1]))):
            mapping[key], index = _block(lines, index, lines[index][0])
        else:
            mapping[key] = None
    return mapping, index


def _sequence(lines, index, indent):
    items = []
    while index < len(lines) and lines[index][0] == indent and _is_item(lines[index][1]):
        _, content, number = lines[index]
        rest = content[1:].strip()
        if not rest:
            if index + 1 >= len(lines) or lines[index + 1][0] <= indent:
                raise YamlError(f'line {number}: an empty sequence item')
            item, index = _block(lines, index + 1, lines[index + 1][0])
        elif KEY.match(rest) or _is_item(rest):
            # `- key: value` opens a mapping whose lines are indented to its key.
            nested = indent + len(content) - len(rest)
            lines = lines[:index] + [(nested, rest, number)] + lines[index + 1:]
            item, index = _block(lines, index, nested)
        else:
            item, index = _scalar(rest, number), index + 1
        items.append(item)
    return items, index


def _scalar(text, number):
    if text[0] in '\'"':
        if len(text) < 2 or text[-1] != text[0]:
            raise YamlError(f'line {number}: text after a quoted scalar: {text!r}')
        inner = text[1:-1]
        if text[0] == '\'':
            return inner.replace('\'\'', '\'')
        if '\\' in inner:
            raise YamlError(f'line {number}: escapes in a double-quoted scalar')
        return inner
    if text[0] in '[{&*!|>%@`':
        raise YamlError(f'line {number}: {text!r} is outside the YAML this reads '
                        '(flow collections, anchors, tags, block scalars)')
    if ': ' in text or text.endswith(':'):
        raise YamlError(f'line {number}: a mapping inside a scalar: {text!r}')
    if text in ('true', 'false'):
        return text == 'true'
    if INTEGER.match(text):
        return int(text)
    if AMBIGUOUS.match(text) or text.lower() in ('true', 'false'):
        raise YamlError(f'line {number}: quote {text!r}: YAML readers disagree on it')
    return text
