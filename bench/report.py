"""The report of a run: results.md, results.json and the chart."""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict
from pathlib import Path

from bench.common import Config, Results


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def report(results: Results, cfg: Config, folder: Path) -> str:
    lines = [
        "# afk-watchdog benchmarks",
        "",
        f"{results.environment}",
        "",
        f"Configuration: {asdict(cfg)}",
        "",
        "## 1. Claim + done throughput (tasks/s, median of rounds)",
        "",
    ]
    counts = cfg.worker_counts
    limit = "raw SQL limit (pgbench, same statements)"
    lines.append(
        "| contender | "
        + " | ".join(f"{n} workers" for n in counts)
        + " | "
        + " | ".join(f"x limit @{n}" for n in counts)
        + " |"
    )
    lines.append("|---" * (1 + 2 * len(counts)) + "|")
    for label, per in results.throughput.items():
        rates = [med(per[n]) for n in counts]
        ratios = [med(per[n]) / med(results.throughput[limit][n]) for n in counts]
        lines.append(
            f"| {label} | "
            + " | ".join(f"{r:,.0f}" for r in rates)
            + " | "
            + " | ".join(f"{x:.2f}" for x in ratios)
            + " |"
        )
    if results.pinned:
        pn = results.pinned
        limit_rate = pn["raw SQL limit (pgbench, same statements)"]
        lines += [
            "",
            f"### Clients pinned away from the server ({pn['workers']:.0f} workers, "
            "server on CPU 0, clients on CPU 1)",
            "",
            "| contender | tasks/s | x limit |",
            "|---|---|---|",
        ]
        lines += [
            f"| {k} | {v:,.0f} | {v / limit_rate:.2f} |" for k, v in pn.items() if k != "workers"
        ]
    lines += ["", "## 2. Enqueue (rows/s)", "", "| method | rows/s | x COPY |", "|---|---|---|"]
    copy = med(results.enqueue.get("COPY", []))
    for label, rates in results.enqueue.items():
        lines.append(f"| {label} | {med(rates):,.0f} | {med(rates) / copy:.2f} |")
    lines += ["", "## 3. Cost as the table grows (ms, median)", ""]
    if results.scale:
        ops = list(next(iter(results.scale.values())))
        lines.append("| rows | " + " | ".join(ops) + " |")
        lines.append("|---" * (1 + len(ops)) + "|")
        for label, row in results.scale.items():
            lines.append(f"| {label} | " + " | ".join(f"{row[o]:.1f}" for o in ops) + " |")
        lines.append("")
        lines.append("EXPLAIN (ANALYZE, BUFFERS) of each statement: `explain-*.txt`.")
    if results.long_txn:
        lt = results.long_txn
        lines += [
            "",
            "## 4. Under a long transaction (claim+done, tasks/s)",
            "",
            f"{lt['workers']} workers; *held*: another session holds a snapshot for the whole run.",
            "",
            "| table | normally | snapshot held | x |",
            "|---|---|---|---|",
        ]
        for variant in ("as shipped", "fillfactor 50"):
            plain, held = lt[f"{variant} plain"], lt[f"{variant} held"]
            lines.append(f"| {variant} | {plain:,.0f} | {held:,.0f} | {held / plain:.2f} |")
    if results.cli:
        c = results.cli
        lines += [
            "",
            "## 5. CLI start-up (ms, median) and service memory",
            "",
            "| command | ms |",
            "|---|---|",
        ]
        lines += [f"| {k} | {v:.0f} |" for k, v in c.items()]
        lines += [
            "",
            f"afk claim x psql: {c['afk claim'] / c['psql -c (claim)']:.2f}; "
            f"afk status x psql: {c['afk status'] / c['psql -c (status)']:.2f}",
        ]
    if results.rss_mb is not None:
        lines.append(f"\nService RSS after an hour-equivalent of ticks: {results.rss_mb:.1f} MB")
    if results.notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in results.notes]
    text = "\n".join(lines) + "\n"
    (folder / "results.md").write_text(text)
    (folder / "results.json").write_text(json.dumps(asdict(results), indent=2, default=str))
    chart(results, cfg, folder / "chart.png")
    return text


def chart(results: Results, cfg: Config, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 5))
    labels = list(results.throughput)
    width = 0.8 / max(1, len(labels))
    for i, label in enumerate(labels):
        xs = [j + i * width for j in range(len(cfg.worker_counts))]
        ax.bar(
            xs, [med(results.throughput[label][n]) for n in cfg.worker_counts], width, label=label
        )
    ax.set_xticks([j + width * (len(labels) - 1) / 2 for j in range(len(cfg.worker_counts))])
    ax.set_xticklabels([f"{n} workers" for n in cfg.worker_counts])
    ax.set_ylabel("tasks/s (claim + done)")
    ax.set_title("afk-watchdog: claim + done throughput")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
