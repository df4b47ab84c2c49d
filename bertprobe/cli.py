"""The ``bertprobe`` command line: run, validate, list."""

from __future__ import annotations

import os
import shutil
import sys
import traceback
from pathlib import Path
from typing import Any

import click
from tabulate import tabulate

from bertprobe.errors import BertprobeError, InternalError, first_line
from bertprobe.results.exitcodes import FAILED as EXIT_FAILED
from bertprobe.results.exitcodes import INTERNAL as EXIT_INTERNAL
from bertprobe.results.exitcodes import OK as EXIT_OK
from bertprobe.results.exitcodes import SIGINT as EXIT_INTERRUPTED
from bertprobe.results.exitcodes import SIGTERM as EXIT_TERMINATED
from bertprobe.results.exitcodes import USAGE as EXIT_USAGE


class _Context:
    def __init__(self, debug: bool) -> None:
        self.debug = debug


def _fail(ctx_obj: _Context, exc: BaseException, code: int = EXIT_USAGE) -> None:
    """The error on one line, or, for several problems found at once, a headline and one numbered line each."""
    if ctx_obj.debug:
        traceback.print_exc()
    problems = getattr(exc, "problems", None)
    if problems and len(problems) > 1:
        click.echo(f"error: {' '.join(str(getattr(exc, 'headline', '')).split())}:", err=True)
        for i, problem in enumerate(problems, 1):
            click.echo(f"  {i}. {' '.join(str(problem).split())}", err=True)
        sys.exit(code)
    message = " ".join(str(exc).split())
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def _set_debug(ctx: click.Context, _param: Any, value: bool) -> None:
    if value:
        obj = ctx.find_object(_Context)
        if obj is not None:
            obj.debug = True


def _debug_option(fn: Any) -> Any:
    """``--debug`` also after the subcommand (``bertprobe run SUITE --debug``), as users type it."""
    return click.option("--debug", is_flag=True, expose_value=False, is_eager=True, callback=_set_debug,
                        help="Show full tracebacks on errors.")(fn)


def _guard(fn: Any) -> Any:
    """Turn BertprobeError into one line on stderr and exit code 2 (tracebacks only with --debug)."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx_obj = click.get_current_context().find_object(_Context) or _Context(False)
        try:
            return fn(*args, **kwargs)
        except BertprobeError as exc:
            _fail(ctx_obj, exc)
        except InternalError as exc:
            _fail(ctx_obj, exc, EXIT_INTERNAL)
        except BrokenPipeError:  # `bertprobe list | head`: the reader left, nothing to report
            sys.stderr.close()
            sys.exit(EXIT_OK)
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

    \b
    Exit codes (the first that applies, in this order: 130/143, 2, 3, 1, 5, 4):
      0    everything checked held (gated: every candidate may replace the baseline, missing nothing)
      1    a decision is "do not ship": an expectation failed, a probe errored, or a candidate
           regressed significantly or misses an expectation the baseline holds
      2    bad input or usage (suite, model, data; runs that do not pair)
      3    an internal error (the report says aborted, with the message)
      4    gated: every candidate may replace the baseline, some missing what the baseline misses too
      5    nothing was checked (no expectation and no gate ran); --allow-skips makes it 0
      130  interrupted by Ctrl-C; 143 by SIGTERM (a partial report is kept)
    """
    ctx.obj = _Context(debug)


_INPUT_OPTIONS = [
    click.option("--model", "models", metavar="[NAME=]PATH", multiple=True,
                 help="Model directory or hub id. One bare PATH replaces the path of every model of the suite "
                      "(variants keep their settings); NAME=PATH replaces that model's path; repeat to audit "
                      "several models side by side."),
    click.option("--data", "data", metavar="PATH", help="csv/tsv/jsonl file or hub id; replaces the suite's data.path."),
    click.option("--limit", type=click.IntRange(min=1), help="Use at most N examples (seeded sample)."),
    click.option("--text", metavar="COL", help="Column holding the text (name or 0-based index); replaces data.text."),
    click.option("--text-pair", metavar="COL", help="Column holding the second text of a pair; replaces data.text_pair."),
    click.option("--label", metavar="COL", help="Column holding the label; replaces data.label."),
    click.option("--label-map", metavar="DATA=CLASS,...",
                 help="Rename the data's labels to the model's class names, e.g. pos=positive,neg=negative; "
                      "adds to data.label_map."),
    click.option("--baseline", metavar="NAME",
                 help="Gate the matrix: judge every other model against NAME (a --model NAME=PATH or a model of "
                      "the suite) and state which may replace it (exit 4 where all may, some sharing the baseline's misses); "
                      "replaces compare.baseline."),
    click.option("--device", metavar="D", help="auto | cpu | cuda | cuda:N | mps (default: the suite's, else auto)."),
    click.option("--dtype", type=click.Choice(["auto", "float32", "float16", "bfloat16"]),
                 help="Compute dtype. auto: float32 on a CPU (even for a float16 checkpoint); the checkpoint's stored "
                      "dtype on a GPU."),
    click.option("--only", multiple=True, metavar="PROBE",
                 help="Run only this probe (id or name); repeatable, or comma-separated: --only accuracy,calibration. "
                      "Only these probes are checked."),
    click.option("--allow-pickle", is_flag=True, help="Allow pickle (.bin) weights. Only for models you trust."),
    click.option("--set", "sets", multiple=True, metavar="PATH=VALUE",
                 help="Change the suite without editing it; VALUE is YAML. Repeatable. E.g. "
                      "--set probes.universal-trigger.params.length=2 --set data.limit=200."),
]


def _input_options(fn: Any) -> Any:
    """The options that choose the models, the data and the probes: the same for ``run`` and ``validate``."""
    for option in reversed(_INPUT_OPTIONS):
        fn = option(fn)
    return fn


@main.command()
@click.argument("suite_files", metavar="[SUITE]...", nargs=-1)
@click.option("--resume", metavar="RUN_DIR",
              help="Continue an interrupted or aborted run in its folder: finished probes are kept and sweeps "
                   "continue from their last finished unit, when the suite, data and weights are unchanged. "
                   "Without SUITE, the run's own suite file and options are used.")
@_input_options
@click.option("--out", metavar="DIR", help="Folder for run folders (default: the suite's report.dir, else reports/).")
@click.option("--seed", type=int, help="Replaces the suite's seed (sampling, trigger restarts, bootstraps).")
@click.option("--threads", type=click.IntRange(min=1), metavar="N",
              help="CPU threads for torch (default: the suite's threads:, else torch's default capped at the "
                   "cores this process may use). On a shared machine, 1 or 2 avoids oversubscription.")
@click.option("--executor", metavar="NAME",
              help="Where models and sweeps run: local (default: this process, one model after another) or ray "
                   "(each model a Ray task, sweeps sharded over workers; needs pip install -e '.[ray]'). "
                   "Replaces the suite's executor:.")
@click.option("--ray-address", metavar="ADDR",
              help="Join a running Ray cluster (auto, HOST:PORT or ray://HOST:10001) instead of starting a private "
                   "one on 127.0.0.1; implies --executor ray.")
@click.option("--workers", type=click.IntRange(min=1), metavar="N",
              help="ray: CPUs of the private cluster and sweep shards (default: the cores this process may use).")
@click.option("--allow-skips", is_flag=True,
              help="Exit 0, not 5, when nothing was checked (every probe skipped or without expectations).")
@click.option("-q", "--quiet", is_flag=True,
              help="Print only the final summary: no log or progress lines, Ctrl-C included (progress stays in events.jsonl).")
@_debug_option
@_guard
def run(suite_files: tuple[str, ...], resume: str | None, models: tuple[str, ...], data: str | None, device: str | None, dtype: str | None,
        out: str | None, only: tuple[str, ...], limit: int | None, allow_pickle: bool, seed: int | None,
        sets: tuple[str, ...], text: str | None, text_pair: str | None, label: str | None,
        label_map: str | None, baseline: str | None, threads: int | None, executor: str | None, ray_address: str | None, workers: int | None,
        allow_skips: bool, quiet: bool) -> None:
    """Run one or more suites and write a scored report for each.

    Each run writes a new folder reports/<suite>-<UTC time>/ with events.jsonl (one record per event,
    written as it happens), report.json, report.md and report.html. A partial report is kept when a
    run is interrupted or stopped by bad input. Several suites run one after another, or side by side
    with --executor ray; the exit code is the most serious of their codes.

    \b
    Examples:
      bertprobe run suites/sst2.yaml
      bertprobe run suites/sst2.yaml --model ./my-model --data dev.tsv --device cuda
      bertprobe run suites/sst2.yaml --model old=./deployed --model new=./candidate
      bertprobe run suites/compression.yaml --executor ray          # models in parallel
      BERTPROBE_SST2_MODEL=./my-model bertprobe run suites/sst2.yaml --only accuracy
    """
    from bertprobe.orchestrate import resume_request, run_suites
    from bertprobe.plugins import build_plugins
    from bertprobe.run.control import RunControl
    from bertprobe.suite.load import load_suite
    from bertprobe.suite.overrides import SuiteOverrides, given_paths

    overrides = SuiteOverrides(text=text, text_pair=text_pair, label=label, label_map=label_map, baseline=baseline,
                               models=models, data=data, sets=sets, device=device, dtype=dtype, only=only, limit=limit,
                               allow_pickle=allow_pickle, seed=seed, executor=executor, ray_address=ray_address,
                               workers=workers)
    if quiet:  # no progress on the terminal, ours or a library's (model loading), even on Ctrl-C; the caller's
        previous = os.environ.get("BERTPROBE_NO_PROGRESS")  # environment comes back when the command ends
        os.environ["BERTPROBE_NO_PROGRESS"] = "1"
        click.get_current_context().call_on_close(lambda: _restore_variable("BERTPROBE_NO_PROGRESS", previous))
    control = RunControl(out=out, threads=threads, resume=resume, log=None if quiet else log_to_stderr)
    suite_env = None
    if not suite_files:
        if not resume:
            raise click.UsageError("missing SUITE (a suite file such as suites/sst2.yaml), or --resume RUN_DIR")
        request = resume_request(resume, overrides, control)  # the run's own suite, variables and options
        suite_files, suite_env, overrides, control = (request.suite_file,), request.environment, request.overrides, request.control
    if resume and len(suite_files) > 1:
        raise click.UsageError("--resume continues one run: give one SUITE (or none)")
    given = given_paths(overrides)  # what --model/--data replace: their paths need no required ${VAR}
    # all checked before any runs; what loading finds is reported with the rest of the preflight's problems
    suites = [load_suite(f, env=suite_env, sets=overrides.sets, given=given, defer=True) for f in suite_files]
    several = len(suites) > 1
    codes: list[int] = []

    def finished(run: Any) -> None:
        codes.append(_outcome(run, allow_skips, several))

    runs = run_suites(suites, build_plugins(), overrides, control, finished)
    if not several and runs[0].error is not None:
        raise runs[0].error  # one suite: its bad input is the command's error (exit 2, --debug for the traceback)
    from bertprobe.results.exitcodes import most_serious

    sys.exit(most_serious(codes))


def _outcome(run: Any, allow_skips: bool, several: bool) -> int:
    """Print how one suite's run ended and return its exit code."""
    title = (run.suite.source or run.suite.name) if several else ""
    if run.session is not None:
        return _summary(run.session, allow_skips, title)
    if run.stopped is not None:
        where = run.run_dir
        click.echo((f"{run.suite.source}: " if several else "") + "interrupted" +
                   (f": partial report in {where}" if where else ""), err=True)
        return EXIT_TERMINATED if run.terminated else EXIT_INTERRUPTED
    if several:
        click.echo(f"error: {run.error}", err=True)
    return EXIT_INTERNAL if isinstance(run.error, InternalError) else EXIT_USAGE


def _summary(session: Any, allow_skips: bool, title: str = "") -> int:
    """Print a finished run's models, results, gate and score; return its exit code."""
    from bertprobe.reporters.summary import (
        decision_lines,
        last_column_widths,
        overview_headers,
        overview_rows,
        score_text,
    )
    from bertprobe.results.exitcodes import nothing_checked, run_exit_code

    report = session.report
    if title:
        click.echo(f"\n== {title}")
    for m in report.models:
        click.echo(f"model {m.name}: {m.device} / {m.dtype}" + (f" ({', '.join(f'{k}={v}' for k, v in m.variant.items())})"
                                                               if m.variant else ""))
    rows, headers = overview_rows(report), overview_headers(report)
    # on a terminal the notes wrap to its width (the decision line below and report.md keep them whole);
    # piped output (CI logs, grep) keeps one line per probe
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
    click.echo(tabulate(rows, headers=headers, tablefmt="simple", maxcolwidths=last_column_widths(rows, headers, width)))
    if report.regressions:
        click.echo(f"\n{len(report.regressions)} regression(s) against {report.gate.get('baseline')}:")
        for regression in report.regressions:
            click.echo(f"  {regression.describe()}")
    elif report.gate:
        click.echo(f"\nno regression against {report.gate.get('baseline')}")
    click.echo(f"\n{score_text(report)}")
    for verdict, line in decision_lines(report):
        click.echo(f"decision: {line}")
        for warning in verdict.warnings:
            click.echo(f"  warning: {warning}")
    click.echo(f"report: {Path(session.run_dir) / 'report.md'}")
    code = run_exit_code(report, allow_skips)
    if nothing_checked(report):
        click.echo("nothing was checked: no probe has an expectation that ran" +
                   (" (--allow-skips: exit 0)" if allow_skips else "; exit 5 (pass --allow-skips to accept)"), err=True)
    return code


@main.command()
@click.argument("run_a", metavar="RUN_A", type=click.Path(file_okay=False))
@click.argument("run_b", metavar="RUN_B", type=click.Path(file_okay=False))
@click.option("--tolerance", type=float, default=None, metavar="X",
              help="Largest change in the bad direction that is not a regression (default 0.01).")
@click.option("--tolerance-for", "tolerance_for", multiple=True, metavar="METRIC=X",
              help="Tolerance of one metric; repeatable.")
@click.option("--significance", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.05,
              show_default=True, metavar="ALPHA",
              help="A change past the tolerance gates only when its paired test (McNemar, paired bootstrap on "
                   "per-example outcomes), Holm-corrected across the metrics, is significant at ALPHA.")
@click.option("--delta-only", is_flag=True,
              help="Judge on the delta alone: every change past the tolerance is a regression, significant or not.")
@click.option("--baseline-model", metavar="NAME", help="Model of RUN_A to compare with (when the runs name models differently).")
@click.option("--allow-different-data", is_flag=True,
              help="Compare runs made on different data: the deltas are shown, nothing pairs and nothing gates.")
@click.option("--out", metavar="DIR", help="Folder for compare.json/.md/.html (default: RUN_B).")
@_debug_option
@_guard
def compare(run_a: str, run_b: str, tolerance: float | None, tolerance_for: tuple[str, ...], significance: float,
            delta_only: bool, baseline_model: str | None, allow_different_data: bool, out: str | None) -> None:
    """Compare two runs made apart: RUN_A is the baseline, RUN_B the candidate.

    Models pair by name (or, when each run has one model, with each other), probes by id, metrics by
    name. Prints a delta table that respects each metric's direction and writes compare.json,
    compare.md and compare.html. Exit codes: 0 no regression, 1 a regression, 2 the runs do not pair.

    \b
    Example:
      bertprobe compare reports/sst2-20261101T000000Z reports/sst2-20261123T000000Z --tolerance 0.005
    """
    from bertprobe.reporters.two_runs import compare_runs, write_comparison
    from bertprobe.suite.schema import DEFAULT_TOLERANCE

    per_metric: dict[str, float] = {}
    for item in tolerance_for:
        name, sep, value = item.partition("=")
        try:
            per_metric[name] = float(value)
        except ValueError:
            raise BertprobeError(f"--tolerance-for {item}: expected METRIC=NUMBER, e.g. accuracy=0.005") from None
        if not sep or not name:
            raise BertprobeError(f"--tolerance-for {item}: expected METRIC=NUMBER, e.g. accuracy=0.005")
    default = DEFAULT_TOLERANCE if tolerance is None else tolerance
    comparison = compare_runs(Path(run_a), Path(run_b), lambda m: per_metric.get(m, default),
                              None if delta_only else significance, baseline_model, allow_different_data)
    paths = write_comparison(comparison, Path(out) if out else Path(run_b))
    click.echo(comparison.text())
    click.echo(f"\nwritten: {', '.join(str(p) for p in paths)}")
    sys.exit(EXIT_FAILED if comparison.regressions else EXIT_OK)


@main.command()
@click.argument("run_dir", metavar="RUN_DIR", type=click.Path(file_okay=False))
@click.option("--format", "formats", multiple=True, metavar="NAME",
              help="Reporter to run (json, markdown, html, junit, or a plugin's); repeatable. Default: all of the "
                   "built-in formats.")
@_debug_option
@_guard
def report(run_dir: str, formats: tuple[str, ...]) -> None:
    """Rebuild a run's reports from its events.jsonl (an interrupted or killed run's included)."""
    from bertprobe.plugins import build_plugins
    from bertprobe.run.resume import rebuild_report

    plugins = build_plugins()
    rebuilt = rebuild_report(Path(run_dir))
    written = []
    for name in formats or ("json", "markdown", "html", "junit"):
        written.append(plugins.reporters.get(name).write(rebuilt, Path(run_dir)))
    click.echo(f"{run_dir}: {rebuilt.status}, {len(rebuilt.probes)} results; written: {', '.join(str(p) for p in written)}")


@main.command()
@click.argument("suite_file", metavar="SUITE")
@_input_options
@click.option("--offline", is_flag=True,
              help="Contact no served model (their readiness and metadata are not asked): for a server not up here, "
                   "or a token not set here. Said in the output.")
@_debug_option
@_guard
def validate(suite_file: str, sets: tuple[str, ...], models: tuple[str, ...], data: str | None, limit: int | None,
             text: str | None, text_pair: str | None, label: str | None, label_map: str | None,
             baseline: str | None, device: str | None, dtype: str | None, only: tuple[str, ...],
             allow_pickle: bool, offline: bool) -> None:
    """Make every check 'run' makes before it loads weights, and report every problem at once.

    Takes run's model, data and probe options. Checks keys, --set assignments, probe names, params and
    expected metrics, reporters, that data files and local model folders exist, that each model's device
    exists here (not for a joined Ray cluster), that named data loaders are installed and hub sources
    reachable, the class names the suite uses (params such as target_label, per-label expectations such as
    recall_joy, behaviour templates' labels, slices' metric: label:NAME) against each local model's
    config.json, and a local data file: its columns, and every row's label against what the probes need and
    against each local model's classes (the first 20 bad rows, then a count), and that each served model answers
    (not with --offline, nor for a joined Ray cluster, whose workers reach it: the output says so). Each probe's
    own files are read too (cloze items and Ettinger's tsv files, BLiMP's jsonl, CrowS-Pairs' csv: every bad line
    named), and with only the model's tokenizer read, its mask token, cloze words it maps to its unknown token
    and sentences longer than config.json's positions. Problems are numbered, one per line. Exit 0 when run
    would start, 2 with the same list run would give.
    """
    from bertprobe.harness import preflight
    from bertprobe.plugins import build_plugins
    from bertprobe.suite.load import load_suite
    from bertprobe.suite.overrides import SuiteOverrides, given_paths

    options = SuiteOverrides(models=models, data=data, limit=limit, text=text, text_pair=text_pair, label=label,
                         label_map=label_map, baseline=baseline, device=device, dtype=dtype, only=only,
                         allow_pickle=allow_pickle, sets=sets)
    checked = preflight(load_suite(suite_file, sets=sets, given=given_paths(options), defer=True), build_plugins(),
                        options, contact=not offline)
    suite = checked.suite
    for note in checked.notes:
        click.echo(note)
    count = len(suite.probes)
    click.echo(f"{suite_file}: ok ({count} probe{'' if count == 1 else 's'}: {', '.join(p.id for p in suite.probes)})")


def _fit(rows: list[list[Any]], headers: list[str], wrap: tuple[int, ...], optional: tuple[int, ...] = (),
         width: int | None = None) -> tuple[str, list[str]]:
    """A table as wide as the terminal, and the headers of the columns left out to fit it.

    Words are never cut: the ``wrap`` columns wrap between words (a hyphenated word or a module path stays
    whole) into what the other columns leave; when even their longest words do not fit, the ``optional``
    columns are left out, in that order.
    """
    import textwrap

    width = width or shutil.get_terminal_size((100, 24)).columns
    columns = list(range(len(headers)))
    texts = [[str(cell) for cell in row] for row in rows]

    def natural(i: int) -> int:  # tabulate's simple format pads a header by 2; columns are 2 apart
        return max([len(headers[i]) + 2] + [len(t[i]) for t in texts])

    def shortest(i: int) -> int:
        return max([len(headers[i]) + 2] + [len(w) for t in texts for w in t[i].split()])

    def room(kept: list[int]) -> int:
        return width - 2 * (len(kept) - 1) - sum(natural(i) for i in kept if i not in wrap)

    dropped = []
    for i in optional:
        kept = [c for c in columns if c not in dropped]
        if room(kept) >= sum(shortest(c) for c in kept if c in wrap):
            break
        dropped.append(i)
    kept = [c for c in columns if c not in dropped]
    limits = {c: shortest(c) for c in kept if c in wrap}
    spare = room(kept) - sum(limits.values())
    wanted = {c: natural(c) - limits[c] for c in limits}
    order = sorted(limits, key=lambda c: wanted[c])
    for n, c in enumerate(order):  # the room left is shared evenly; a column takes no more than it needs
        grant = max(0, min(wanted[c], spare // (len(order) - n)))
        limits[c] += grant
        spare -= grant

    def cell(c: int, text: str) -> str:
        if c not in limits:
            return text
        return textwrap.fill(text, limits[c], break_long_words=False, break_on_hyphens=False)

    table = tabulate([[cell(c, t[c]) for c in kept] for t in texts], headers=[headers[c] for c in kept], tablefmt="simple")
    return table, [headers[c] for c in dropped]


def _blurb(item: Any) -> str:
    """An item's one-line description: its ``description``, else its docstring's first line (executors)."""
    return getattr(item, "description", None) or first_line(getattr(item, "__doc__", None) or "")


def _listing(plugins: Any, width: int | None = None) -> str:
    """What ``bertprobe list`` prints: the plugins, tasks, probes, reporters, data loaders and executors."""
    import textwrap

    width = width or shutil.get_terminal_size((100, 24)).columns
    out = []

    def table(title: str, rows: list[list[Any]], headers: list[str], wrap: tuple[int, ...],
              optional: tuple[int, ...] = ()) -> None:
        text, dropped = _fit(rows, headers, wrap, optional, width)
        out.extend([title, text])
        if dropped:  # only the probes' plugin column is optional
            out.append(textwrap.fill(f"(column {', '.join(dropped)} left out to fit {width} columns; "
                                     "'bertprobe describe PROBE' names a probe's plugin)", width,
                                     break_long_words=False, break_on_hyphens=False))

    table("Plugins", [[r["name"], r["version"], r["source"]] for r in plugins.describe()], ["name", "version", "source"],
          (2,))
    table("\nTasks (model.task; auto detects them from config.json)",
          [[n, plugins.tasks.get(n).description, plugins.tasks.origin(n)] for n in plugins.tasks.names()],
          ["task", "description", "plugin"], (1,))
    rows = []
    for name in plugins.probes.names():
        cls = plugins.probes.get(name)
        rows.append([name, f"{', '.join(sorted(cls.tasks))}; needs {', '.join(sorted(cls.requires)) or 'nothing'}",
                     cls.description, plugins.probes.origin(name)])
    table("\nProbes", rows, ["probe", "tasks; needs", "description", "plugin"], (1, 2), optional=(3,))
    table("\nReporters (name them in report.formats)",
          [[n, getattr(plugins.reporters.get(n), "filename", ""), plugins.reporters.origin(n)]
           for n in plugins.reporters.names()], ["format", "writes", "plugin"], (1,))
    if len(plugins.datasets):
        table("\nData loaders (data: {loader: NAME, path: ...})",
              [[n, plugins.datasets.get(n).description, plugins.datasets.origin(n)] for n in plugins.datasets.names()],
              ["loader", "description", "plugin"], (1,))
    table("\nExecutors (executor: NAME, or --executor NAME)",
          [[n, _blurb(plugins.executors.get(n)), plugins.executors.origin(n)] for n in plugins.executors.names()],
          ["executor", "description", "plugin"], (1,))
    out.append("\n'bertprobe describe PROBE' shows a probe's paper, params and metrics.")
    return "\n".join(out)


@main.command(name="list")
@_debug_option
@_guard
def list_(**_: Any) -> None:
    """List installed plugins (name, version, source), tasks, and probes (name, tasks, requirements, description)."""
    from bertprobe.plugins import build_plugins

    click.echo(_listing(build_plugins(listing=True)))  # the built-ins from their catalog: nothing heavy imported


@main.command()
@click.argument("runs", nargs=-1, metavar="[RUN_DIR]...")
@click.option("--aborted", is_flag=True, help="Remove aborted or killed runs that cannot be resumed.")
@click.option("--dir", "reports_dir", default="reports", show_default=True, metavar="DIR",
              help="The reports folder (for --aborted, and for names given without a folder).")
@_debug_option
@_guard
def clean(runs: tuple[str, ...], aborted: bool, reports_dir: str) -> None:
    """Remove run folders and rebuild reports/index.html: the named runs, or with --aborted every aborted
    or killed run that kept no result to resume."""
    from bertprobe.reporters.runindex import clean as clean_runs

    if not runs and not aborted:
        raise BertprobeError("clean: name run folders to remove, or pass --aborted")
    by_dir: dict[Path, list[str]] = {}
    for run in runs:
        path = Path(run)
        folder = path.parent if path.parent != Path(".") else Path(reports_dir)
        by_dir.setdefault(folder, []).append(path.name)
    removed = []
    for folder, names in by_dir.items():
        removed += clean_runs(folder, names, aborted and folder == Path(reports_dir))
    if aborted and Path(reports_dir) not in by_dir:
        removed += clean_runs(Path(reports_dir), [], True)
    click.echo(f"removed {len(removed)} run(s)" + (": " + ", ".join(p.name for p in removed) if removed else ""))


@main.command()
@click.argument("probe", metavar="PROBE")
@_debug_option
@_guard
def describe(probe: str) -> None:
    """A probe's paper and deviations, its params (type, default) and its metrics."""
    from bertprobe.plugins import build_plugins

    listed = build_plugins(listing=True)  # the built-ins from their catalog: no torch for a metadata command
    stored = getattr(listed.probes.get(probe), "text", "")
    if stored and not len(listed.sections):  # no installed plugin adds a section (whose checks need the real build)
        click.echo(stored, nl=False)
        return
    from bertprobe.catalog import describe_text

    plugins = build_plugins()
    click.echo(describe_text(plugins.probes.get(probe), plugins), nl=False)


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


def _restore_variable(name: str, value: str | None) -> None:
    """Put an environment variable back as it was (unset when ``value`` is None)."""
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def log_to_stderr(message: str) -> None:
    """A run's progress and notes: to stderr, at once (stdout keeps the results)."""
    print(message, file=sys.stderr, flush=True)


if __name__ == "__main__":
    entry_point()
