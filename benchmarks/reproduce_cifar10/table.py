"""The study's table: each published row beside qflow's figures, from the files qflow-train
wrote (log.csv for the float model's final test accuracy and every run's images/s;
results.csv for the QAT model and its integer deploy model; study.json for the processes and
the device that trained it), written to OUT/table.md and OUT/table.csv. A row whose run has not
finished shows "-"."""
import csv
import io
import os

COLUMNS = ("run", "published", "qflow", "difference", "deploy", "test images", "epochs", "wall time",
           "images/s", "processes", "device")


def clock(seconds):
    s = int(round(seconds))
    return "{}:{:02d}:{:02d}".format(s // 3600, s // 60 % 60, s % 60)


def figures(run, test_images):
    """The row's numbers (None where the run has no such figure yet); accuracies to the
    hundredth the table prints, so the difference is that of the printed figures."""
    f = dict(run=run.config.label, published=run.config.published, qflow=None, deploy=None, deploy_stage=None,
             test_images=None, epochs=None, wall=None, images_per_s=None, processes=None, device=None)
    if not run.done:
        return f
    log = run.log()
    f.update(epochs=len(log), wall=run.wall_seconds(), images_per_s=run.images_per_s(),
             processes=run.state.get("processes"), device=run.devices())
    if run.config.is_qat:
        results = run.results()
        deploy = next((r for stage, r in results.items() if stage.startswith("deploy")), None)
        f.update(qflow=round(float(results["QAT"]["accuracy"]), 2), test_images=int(results["QAT"]["test_images"]))
        if deploy:
            f.update(deploy=float(deploy["accuracy"]), deploy_stage=deploy["stage"])
    else:
        # The final epoch's test accuracy: the model the recipe ends with (as the QAT rows,
        # which qflow-train reports after the last epoch), not the best epoch's.
        f.update(qflow=round(float(log[-1]["test_acc"]), 2), test_images=test_images)
    return f


def _pct(v):
    return "-" if v is None else "{:.2f} %".format(v)


def markdown(rows, heading):
    lines = [heading, "", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for f in rows:
        diff = "-" if f["qflow"] is None else "{:+.2f}".format(f["qflow"] - f["published"])
        deploy = _pct(f["deploy"])
        if f["deploy_stage"]:  # "deploy (int8)", or "(float)" where layers ran the float simulation
            deploy += " " + f["deploy_stage"].replace("deploy", "").strip()
        cells = [f["run"], _pct(f["published"]), _pct(f["qflow"]), diff, deploy,
                 "-" if f["test_images"] is None else "{:,}".format(f["test_images"]),
                 "-" if f["epochs"] is None else str(f["epochs"]),
                 "-" if f["wall"] is None else clock(f["wall"]),
                 "-" if f["images_per_s"] is None else "{:.1f}".format(f["images_per_s"]),
                 "-" if f["processes"] is None else str(f["processes"]),
                 f["device"] or "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def csv_text(rows):
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["run", "published_accuracy", "qflow_accuracy", "difference", "deploy_accuracy", "deploy_stage",
                "test_images", "epochs", "wall_seconds", "images_per_s", "processes", "device"])
    num = lambda v, fmt: "" if v is None else fmt.format(v)
    for f in rows:
        w.writerow([f["run"], "{:.2f}".format(f["published"]), num(f["qflow"], "{:.2f}"),
                    "" if f["qflow"] is None else "{:.2f}".format(f["qflow"] - f["published"]),
                    num(f["deploy"], "{:.2f}"), f["deploy_stage"] or "", num(f["test_images"], "{}"),
                    num(f["epochs"], "{}"), num(f["wall"], "{:.0f}"), num(f["images_per_s"], "{:.1f}"),
                    num(f["processes"], "{}"), f["device"] or ""])
    return out.getvalue()


def write(out_dir, runs, test_images, heading):
    """Writes OUT/table.md and OUT/table.csv (each replaced whole); returns the Markdown."""
    rows = [figures(r, test_images) for r in runs]
    text = markdown(rows, heading)
    for name, content in (("table.md", text), ("table.csv", csv_text(rows))):
        path = os.path.join(out_dir, name)
        with open(path + ".tmp", "w") as f:
            f.write(content)
        os.replace(path + ".tmp", path)
    return text
