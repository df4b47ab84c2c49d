"""The ``bertprobe`` command line: run, validate, list."""

from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import Any

import click
from tabulate import tabulate

from bertprobe.errors import BertprobeError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class _Context:
    def __init__(self, debug: bool) -> None:
        self.debug = debug


def _fail(ctx_obj: _Context, exc: BaseException) -> None:
    if ctx_obj.debug:
        traceback.print_exc()
    message = " ".join(str(exc).split())
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_USAGE)


def _guard(fn: Any) -> Any:
    """Turn BertprobeError into one line on stderr and exit code 2 (tracebacks only with --debug)."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx_obj = click.get_current_context().find_object(_Context) or _Context(False)
        try:
            return fn(*args, **kwargs)
        except BertprobeError as exc:
            _fail(ctx_obj, exc)
        except OSError as exc:
            _fail(ctx_obj, BertprobeError(f"{exc.strerror or exc}: {exc.filename or ''}".strip(": ")))

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--debug", is_flag=True, help="Show full tracebacks on errors.")
@click.version_option(package_name="bertprobe")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """Adversarial and robustness probes for fine-tuned BERT-family models.

    \b
    Typical use:
      bertprobe list                          # installed plugins and probes
      bertprobe validate suites/sst2.yaml     # check a suite without loading a model
      bertprobe run suites/sst2.yaml --model ../shared/models/minilm-l6-sst2 \\
                                     --data ../shared/data/sst2/dev.tsv

    Exit codes: 0 all expectations held, 1 an expectation failed or a probe errored,
    2 bad input (suite, model, data), 130 interrupted.
    """
    ctx.obj = _Context(debug)


@main.command()
@click.argument("suite_file", metavar="SUITE")
@click.option("--model", "model", metavar="PATH", help="Model directory or hub id; replaces the suite's model.path.")
@click.option("--data", "data", metavar="PATH", help="csv/tsv/jsonl file or hub id; replaces the suite's data.path.")
@click.option("--device", metavar="D", help="auto | cpu | cuda | cuda:N | mps (default: the suite's, else auto).")
@click.option("--dtype", type=click.Choice(["auto", "float32", "float16", "bfloat16"]), help="Compute dtype (auto: float32 on CPU).")
@click.option("--out", metavar="DIR", help="Folder for run folders (default: the suite's report.dir, else reports/).")
@click.option("--only", multiple=True, metavar="PROBE", help="Run only this probe (id or name); repeatable.")
@click.option("--limit", type=click.IntRange(min=1), help="Use at most N examples (seeded sample).")
@click.option("--allow-pickle", is_flag=True, help="Allow pickle (.bin) weights. Only for models you trust.")
@click.option("-q", "--quiet", is_flag=True, help="Print only the final summary.")
@_guard
def run(suite_file: str, model: str | None, data: str | None, device: str | None, dtype: str | None,
        out: str | None, only: tuple[str, ...], limit: int | None, allow_pickle: bool, quiet: bool) -> None:
    """Run a suite and write a scored report.

    Each run writes a new folder reports/<suite>-<UTC time>/ with events.jsonl (one record per event,
    written as it happens), report.json, report.md and report.html. A partial report is kept when a
    run is interrupted or stopped by bad input.

    \b
    Examples:
      bertprobe run suites/sst2.yaml
      bertprobe run suites/sst2.yaml --model ./my-model --data dev.tsv --device cuda
      BERTPROBE_SST2_MODEL=./my-model bertprobe run suites/sst2.yaml --only accuracy
    """
    from bertprobe.harness import RunOptions, log_to_stderr, run_suite
    from bertprobe.plugins import build_plugins
    from bertprobe.reporters.summary import OVERVIEW_HEADERS, overview_rows, score_text
    from bertprobe.suite import load_suite

    suite = load_suite(suite_file)
    plugins = build_plugins()
    options = RunOptions(model=model, data=data, device=device, dtype=dtype, out=out, only=only, limit=limit,
                         allow_pickle=allow_pickle, log=None if quiet else log_to_stderr)
    try:
        session = run_suite(suite, plugins, options)
    except KeyboardInterrupt:
        click.echo("interrupted: partial report kept", err=True)
        sys.exit(EXIT_INTERRUPTED)
    report = session.report
    click.echo(tabulate(overview_rows(report), headers=OVERVIEW_HEADERS, tablefmt="simple"))
    click.echo(f"\nscore: {score_text(report)}   report: {Path(session.run_dir) / 'report.md'}")
    sys.exit(EXIT_OK if report.ok else EXIT_FAILED)


@main.command()
@click.argument("suite_file", metavar="SUITE")
@_guard
def validate(suite_file: str) -> None:
    """Check a suite (keys, probe names, params, expected metrics) without loading any model."""
    from bertprobe.plugins import build_plugins
    from bertprobe.suite import load_suite, validate_probes

    suite = load_suite(suite_file)
    plugins = build_plugins()
    validate_probes(suite, plugins.probes, plugins.reporters)
    click.echo(f"{suite_file}: ok ({len(suite.probes)} probes: {', '.join(p.id for p in suite.probes)})")


@main.command(name="list")
@_guard
def list_(**_: Any) -> None:
    """List installed plugins (name, version, source) and probes (name, requirements, description)."""
    from bertprobe.plugins import build_plugins

    plugins = build_plugins()
    click.echo("Plugins")
    click.echo(tabulate([[r["name"], r["version"], r["source"]] for r in plugins.describe()],
                        headers=["name", "version", "source"], tablefmt="simple"))
    rows = []
    for name in plugins.probes.names():
        cls = plugins.probes.get(name)
        rows.append([name, ", ".join(sorted(cls.requires)) or "-", cls.description, plugins.probes.origin(name)])
    click.echo("\nProbes")
    click.echo(tabulate(rows, headers=["probe", "requires", "description", "plugin"], tablefmt="simple"))
    if len(plugins.datasets):
        click.echo("\nData loaders")
        click.echo(tabulate([[n, plugins.datasets.get(n).description] for n in plugins.datasets.names()],
                            headers=["loader", "description"], tablefmt="simple"))


def entry_point(argv: list[str] | None = None) -> None:
    """Console script: click usage errors become one line (``error: ...``) with exit code 2."""
    try:
        main.main(args=argv, standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
        sys.exit(EXIT_USAGE)
    except click.UsageError as exc:
        command = exc.ctx.command_path if exc.ctx else "bertprobe"
        click.echo(f"error: {exc.format_message().rstrip('.')}; see '{command} --help'", err=True)
        sys.exit(EXIT_USAGE)
    except click.Abort:
        click.echo("interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except click.ClickException as exc:
        click.echo(f"error: {exc.format_message()}", err=True)
        sys.exit(EXIT_USAGE)
    sys.exit(EXIT_OK)


if __name__ == "__main__":
    entry_point()
