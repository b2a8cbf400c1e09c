"""MkDocs hook: the reference pages' tables come from the code, so they cannot drift from it.

A page names what it wants with a marker line, replaced at build time:

- ``<!-- generated: options -->``: every option (``s3commit_sdk.options.reference_table``);
- ``<!-- generated: cli -->``: every ``s3commit`` command's help, from its argparse parser;
- ``<!-- generated: errors -->``: every error type, its base, its own fields, its docstring;
- ``<!-- generated: visible -->``: the values of an error's ``visible`` field;
- ``<!-- generated: iam -->``: the S3 operations, the IAM actions each use needs, the policy
  (``s3commit_sdk.iam.reference_markdown``).

The benchmark reports (``docs/bench-reports``, a link to ``bench/reports``) are kept out of the
site's search: past runs' figures would bury the pages that explain them.
"""

from __future__ import annotations

import argparse
import inspect
import re

from s3commit_sdk import errors, iam, options
from s3commit_sdk.cli import build_parser

MARKER = re.compile(r"^<!-- generated: (\w+) -->$", re.MULTILINE)
BASE_FIELDS = ("message", "destination", "job_id", "visible", "remedy")


def on_page_markdown(markdown: str, page, config, files) -> str:  # MkDocs calls it with these
    if page.file.src_uri.startswith("bench-reports/"):  # past runs: linked, not searched
        page.meta["search"] = {"exclude": True}
    return MARKER.sub(lambda match: GENERATORS[match.group(1)](), markdown)


def options_table() -> str:
    return options.reference_table()


def cli_reference() -> str:
    """Each command's ``--help``, as the installed ``s3commit`` prints it."""
    parser = build_parser()
    sections = ["### `s3commit`\n", "```text\n" + parser.format_help() + "```\n"]
    for name, sub in _subcommands(parser, "s3commit"):
        sections += [f"### `{name}`\n", "```text\n" + sub.format_help() + "```\n"]
    return "\n".join(sections)


def _subcommands(parser: argparse.ArgumentParser, prefix: str):
    for action in parser._actions:  # argparse keeps its subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{prefix} {name}", sub
                yield from _subcommands(sub, f"{prefix} {name}")


def error_table() -> str:
    rows = ["| error | subclass of | its own fields | raised when |", "| --- | --- | --- | --- |"]
    for cls in _error_classes():
        bases = ", ".join(f"`{b.__name__}`" for b in cls.__bases__ if b is not Exception)
        fields = [
            name
            for name, parameter in inspect.signature(cls.__init__).parameters.items()
            if parameter.kind is parameter.KEYWORD_ONLY and name not in BASE_FIELDS
        ]
        doc = " ".join((inspect.getdoc(cls) or "").split("\n\n")[0].split())
        shown = ", ".join(f"`{f}`" for f in fields) or "(the common ones)"
        rows.append(f"| `{cls.__name__}` | {bases} | {shown} | {doc.replace('|', '/')} |")
    return "\n".join(rows) + "\n"


def _error_classes() -> list[type]:
    found = [
        cls
        for cls in vars(errors).values()
        if isinstance(cls, type) and issubclass(cls, errors.S3CommitError)
    ]
    return sorted(found, key=lambda cls: (len(cls.__mro__), cls.__name__))


def visible_values() -> str:
    rows = ["| `visible` | means |", "| --- | --- |"]
    rows += [f"| `{key}` | {words} |" for key, words in errors.VISIBLE.items()]
    return "\n".join(rows) + "\n"


GENERATORS = {
    "options": options_table,
    "cli": cli_reference,
    "errors": error_table,
    "visible": visible_values,
    "iam": iam.reference_markdown,
}
