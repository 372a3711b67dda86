"""The workflow's subcommands for ``agentrl``: argument parsers and handlers (cli.py only wires them).

    agentrl data check [FILE...] [--config CONFIG] [--model PATH|demo] [--json]
    agentrl data split FILE --val 0.15 --stratify KEY[,KEY] --seed 0 -o DIR
    agentrl data convert FILE(.jsonl|.parquet) -o OUT.jsonl | --to verl [--split val] -o OUT.parquet
    agentrl data convert --from NAME SOURCE -o OUT.jsonl      (a plugin's converter, e.g. --from bfcl simple_python)
    agentrl prior CONFIG [--samples 5] [--limit 50] [--data FILE]
    agentrl eval CONFIG --model base|RUN_DIR[:STEP]|PATH [--data FILE] [--samples K] -o OUT.jsonl
    agentrl compare A.jsonl B.jsonl [--by metadata.KEY ...] [-o compare.json]
    agentrl inspect COMPARE_OR_EVAL [--worst N]
    agentrl export RUN_DIR [--step N] OUT_DIR
    agentrl models import smollm2-135m-instruct [--dtype bfloat16] | agentrl models list
    agentrl models warmup MODEL --data ROWS.jsonl -o OUT_DIR   (a short supervised warm-up: agentrl.workflow.warmup)
"""

from __future__ import annotations

import argparse

from agentrl.workflow.show import Output


def _quiet() -> None:
    """verl logs every prompt it cuts to prompt_length and every tool call it cannot decode; here these
    would bury the tables. `agentrl data check` reports cut prompts per row, and a malformed call reaches
    the record as an error tool result."""
    from agentrl.verl.agent_loop import quiet_logs

    quiet_logs()


def _data(args: argparse.Namespace) -> int:
    out = Output(args.json)
    if args.action == "check":
        from agentrl.workflow.data import check
        from agentrl.workflow.models import load_settings

        settings = load_settings(args.config) if args.config else None
        model = load_settings_demo() if args.model == "demo" else args.model or (settings.model if settings else None)
        files = args.files or ([f for f in (settings.train_data, settings.val_data) if f] if settings else [])
        if not files:
            raise SystemExit("agentrl data check: give FILE(s), or --config CONFIG to check its train_data and val_data")
        result = check(files, settings=settings, model=model, config=args.config)
        _show_check(result, out)
        out.emit(result)
        return 0 if result["ok"] else 1
    if len(args.files) != 1 and not (args.action == "convert" and args.source_format):
        raise SystemExit(f"agentrl data {args.action} takes one FILE")
    if args.action == "split":
        from agentrl.workflow.data import split

        if not args.out:
            raise SystemExit("agentrl data split needs -o DIR")
        result = split(args.files[0], val=args.val, stratify=[k for k in (args.stratify or "").split(",") if k],
                       seed=args.seed, out_dir=args.out)
        out.table(f"split {args.files[0]} (seed {args.seed})", ["stratum", "rows", "val"],
                  [[", ".join(f"{k}={v}" for k, v in s["stratum"].items()) or "(all)", s["rows"], s["val"]]
                   for s in result["strata"]])
        out.line(f"train: {result['train']} ({result['train_rows']} rows)   val: {result['val']} ({result['val_rows']} rows)")
        out.emit(result)
        return 0
    from agentrl.workflow.convert import convert_file, convert_from

    if args.source_format:  # a plugin's converter: SOURCE is its word (a BFCL category, ...)
        name, source = args.source_format
        if not args.out or args.files:
            raise SystemExit(f"agentrl data convert --from {name} {source} -o OUT.jsonl (no other input files)")
        result = convert_from(name, source, args.out)
        out.line(f"converted {result['rows']} rows from {result['from']} {result['source']} → {result['out']}")
        out.emit(result)
        return 0
    if not args.out:
        raise SystemExit("agentrl data convert needs -o OUT.jsonl (--to verl: -o OUT.parquet)")
    result = convert_file(args.files[0], args.out, to=args.to, split=args.split)
    same = result["rows"] - result["changed"]
    out.line(f"converted {result['rows']} rows → {result['out']} ({result['changed']} changed"
             + (f"; {same} already agentrl rows, copied as they are" if same else "") + ")")
    out.emit(result)
    return 0


def load_settings_demo() -> str:
    from agentrl.runner import resolve_model

    return resolve_model("demo")[0]


def _show_check(result: dict, out: Output) -> None:
    s = result["summary"]
    for p in result["problems"]:
        out.line(f"{p['where']}: {p['problem']}")
    warnings = result["warnings"]
    for w in warnings[:5]:
        out.line(f"{w['where']}: warning: {w['problem']}")
    if len(warnings) > 5:
        out.line(f"... and {len(warnings) - 5} more warnings like these (--json lists all)")
    out.line((f"{len(result['problems'])} problem(s) in {s['rows']} valid rows" if result["problems"]
              else f"no problems in {s['rows']} rows") + (f", {len(warnings)} warning(s)" if warnings else ""))
    out.table("rows", ["file", "rows"], [[f, n] for f, n in s["files"].items()])
    out.table("metadata", ["key", "rows", "distinct", "top values"],
              [[k, m["rows"], m["distinct"], ", ".join(f"{v} ×{n}" for v, n in list(m["values"].items())[:5])]
               for k, m in s["metadata"].items()])
    if "model_format" in s:
        f = s["model_format"]
        out.line(f"model format: {f['family']} (parser {f['parser']}, from the {f['chosen']}"
                 + (f" in {f['template']}" if f["template"] and f["chosen"] == "chat template" else "")
                 + f"); final_answer: {f['final_answer'] or 'the last turn with special tokens removed'}")
    if "coding_tests" in s:
        out.table("coding tests (the layout the coding reward reads them in)", ["layout", "rows", "tests", "per row"],
                  [[name, c["rows"], c["tests"], f"{c['min']}-{c['max']} (median {c['median']:g})"]
                   for name, c in s["coding_tests"].items()])
    if "prompt_tokens" in s:
        t = s["prompt_tokens"]
        out.line(f"prompt tokens{' (with tool schemas)' if t['with_tool_schemas'] else ''}: min {t['min']}, "
                 f"median {t['median']}, p95 {t['p95']}, max {t['max']}"
                 + (f"; agentrl.max_prompt_length {t['limit']}" if t["limit"] else ""))


def _prior(args: argparse.Namespace) -> int:
    from agentrl.workflow.evaluate import prior

    _quiet()
    prior(args.config, samples=args.samples, limit=args.limit, data=args.data, engine=args.engine,
          temperature=args.temperature, out=Output(args.json), overrides=args.overrides)
    return 0


def _eval(args: argparse.Namespace) -> int:
    from agentrl.workflow.evaluate import evaluate

    _quiet()
    evaluate(args.config, args.model, data=args.data, samples=args.samples, temperature=args.temperature,
             limit=args.limit, output=args.output, engine=args.engine, out=Output(args.json), overrides=args.overrides)
    return 0


def _compare(args: argparse.Namespace) -> int:
    from agentrl.workflow.compare import compare

    compare(args.a, args.b, by=args.by or [], out=Output(args.json), output=args.output)
    return 0


def _inspect(args: argparse.Namespace) -> int:
    from agentrl.workflow.inspect_cmd import inspect

    inspect(args.file, worst=args.worst, out=Output(args.json), credit=args.credit)
    return 0


def _export(args: argparse.Namespace) -> int:
    from agentrl.workflow.export import export

    export(args.run_dir, args.out_dir, step=args.step, out=Output(args.json), force=args.force)
    return 0


def _engine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", default="auto", choices=["auto", "transformers", "vllm"],
                   help="auto: vLLM when installed with a GPU, else transformers")
    p.add_argument("--temperature", type=float, default=None)
    p.add_argument("--limit", type=int, default=None, help="only the first N prompts")
    p.add_argument("--json", action="store_true", help="print JSON for machines")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="config override, e.g. --set agentrl.agent.max_turns=4")


def _models(args: argparse.Namespace) -> int:
    from agentrl.workflow.model_import import KNOWN, import_model, models_home

    if args.action == "list":
        for m in KNOWN.values():
            done = (models_home() / m.name / ".agentrl-import.json").is_file()
            print(f"{m.name:24} from the package {m.distribution}=={m.version}  "
                  f"{'imported: ' + str(models_home() / m.name) if done else 'not imported yet'}")
        return 0
    if args.action == "warmup":
        if not (args.name and args.data and args.out):
            raise SystemExit("agentrl models warmup MODEL --data ROWS.jsonl -o OUT_DIR (MODEL: a folder or a "
                             "packaged model's name)")
        from agentrl.workflow.warmup import main_args

        return main_args(args)
    if not args.name:
        raise SystemExit(f"agentrl models import NAME; NAME is one of {', '.join(sorted(KNOWN))}")
    print(import_model(args.name, dtype=args.dtype))
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    d = sub.add_parser("data", help="check, split or convert a JSONL dataset")
    d.add_argument("action", choices=["check", "split", "convert"])
    d.add_argument("files", nargs="*", help="JSONL files (check: default the config's train_data and val_data)")
    d.add_argument("--config", help="check: the training config (rewards' metadata, tools, max_prompt_length)")
    d.add_argument("--model", help="check: tokenizer for prompt lengths (a model folder, or 'demo'; default: the config's model)")
    d.add_argument("--val", type=float, default=0.15, help="split: validation share")
    d.add_argument("--stratify", help="split: metadata keys, comma-separated (e.g. task_type,difficulty)")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("-o", "--out", help="split: output folder; convert: output file")
    d.add_argument("--to", choices=["agentrl", "verl"], default="agentrl",
                   help="convert: agentrl JSONL rows, or verl's parquet rows (prompt, data_source, reward_model, extra_info)")
    d.add_argument("--from", dest="source_format", nargs=2, metavar=("NAME", "SOURCE"),
                   help="convert: rows made by a plugin's dataset converter (`agentrl plugins` lists them), "
                        "e.g. --from bfcl simple_python")
    d.add_argument("--split", choices=["train", "val"], default="train",
                   help="convert --to verl: the rows' extra_info.split (val: validation rows)")
    d.add_argument("--json", action="store_true")
    d.set_defaults(func=_data)
    p = sub.add_parser("prior", help="is the task learnable? the base model's success rate per prompt")
    p.add_argument("config")
    p.add_argument("--samples", type=int, default=5)
    p.add_argument("--data", help="default: the config's train_data")
    _engine_args(p)
    p.set_defaults(func=_prior, limit=50)
    e = sub.add_parser("eval", help="per-sample evaluation of a model through the real tools and rewards")
    e.add_argument("config")
    e.add_argument("--model", required=True, help="base | RUN_DIR | RUN_DIR:STEP | model folder")
    e.add_argument("--data", help="default: the config's val_data")
    e.add_argument("--samples", type=int, default=1, help="rollouts per prompt (1: greedy)")
    e.add_argument("-o", "--output", required=True, help="per-sample records (JSONL)")
    _engine_args(e)
    e.set_defaults(func=_eval)
    c = sub.add_parser("compare", help="two eval files, per prompt and per slice")
    c.add_argument("a")
    c.add_argument("b")
    c.add_argument("--by", action="append", help="slice by metadata.KEY (repeatable)")
    c.add_argument("-o", "--output", help="write the comparison (for agentrl inspect)")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=_compare)
    i = sub.add_parser("inspect", help="the worst regressions (or rollouts), traces side by side")
    i.add_argument("file", help="a compare file (-o of agentrl compare), an eval file or a run's rollouts.jsonl")
    i.add_argument("--worst", type=int, default=5)
    i.add_argument("--credit", choices=("episode", "turn", "step_group"),
                   help="per-turn advantages by this method (default: a run's agentrl.credit, else episode)")
    i.add_argument("--json", action="store_true")
    i.set_defaults(func=_inspect)
    x = sub.add_parser("export", help="a standalone HuggingFace folder from a run (LoRA merged)")
    x.add_argument("run_dir")
    x.add_argument("out_dir")
    x.add_argument("--step", type=int)
    x.add_argument("--force", action="store_true", help="replace a non-empty OUT_DIR")
    x.add_argument("--json", action="store_true")
    x.set_defaults(func=_export)
    m = sub.add_parser("models", help="pretrained models that registry packages ship, as HuggingFace folders",
                       description="import writes the folder under $AGENTRL_HOME/models "
                                   "(default ~/.cache/agentrl/models), once")
    m.add_argument("action", choices=["import", "list", "warmup"])
    m.add_argument("name", nargs="?", help="import: the model's name (agentrl models list shows them); "
                                           "warmup: the model to start from (a folder or a packaged name)")
    m.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32", help="import: the weights' dtype")
    m.add_argument("--data", help="warmup: rows with metadata.demonstration (agentrl.workflow.warmup)")
    m.add_argument("-o", "--out", help="warmup: the folder to write")
    m.add_argument("--epochs", type=int, default=1, help="warmup: passes over the rows")
    m.add_argument("--lr", type=float, default=2e-5, help="warmup: peak learning rate (decays linearly to 0)")
    m.add_argument("--batch-size", type=int, default=8, help="warmup: rows per step")
    m.add_argument("--max-length", type=int, default=1536, help="warmup: tokens per row, prompt included")
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--force", action="store_true", help="warmup: replace a non-empty OUT folder")
    m.add_argument("--config", help="warmup: a training config; its tool servers are offered in every prompt as its "
                                    "rollouts offer them (a row's allowed_tools applies)")
    m.set_defaults(func=_models)
