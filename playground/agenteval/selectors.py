"""Reads for the task run pages and exports: per-profile rows, paired tests, the per-task grid, the chart."""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from datetime import timedelta
from itertools import combinations
from typing import Any

from django.utils import timezone

from playground.agenteval.models import TaskRun, TaskRunItem
from playground.engine.agent_measures import paired_comparison, profile_summary
from playground.engine.modes import parse_mode
from playground.engine.wires.registry import settings_for_vendor, wire_style, wire_styles
from playground.engine.wires.vendors import ANTHROPIC, OPENAI
from playground.registry.adapter import agent_settings
from playground.registry.models import AgentProfile


def items_of(run: TaskRun) -> list[TaskRunItem]:
    return list(run.items.select_related("task", "conversation").order_by("position", "id"))


def provider_of(run: TaskRun, profile_name: str, items: list[TaskRunItem]) -> str:
    """The provider the profile's conversations used (read from a conversation's first turn), else its setting."""
    for item in items:
        if item.profile_name == profile_name and item.measures and item.measures.get("provider"):
            return item.measures["provider"]
    chosen = next((p.get("provider") for p in run.profiles if p.get("name") == profile_name), "")
    return chosen or "auto"


def report(run: TaskRun, items: list[TaskRunItem] | None = None) -> dict[str, Any]:
    """The command's JSON shape: {"tasks", "profiles": [...], "pairs": [...]} (plus a few page extras)."""
    items = items if items is not None else items_of(run)
    names = [p["name"] for p in run.profiles]
    by_profile: dict[str, list[TaskRunItem]] = {name: [] for name in names}
    for item in items:
        by_profile.setdefault(item.profile_name, []).append(item)
    rows = []
    outcomes: dict[str, dict[int, bool]] = {}
    for name, own in by_profile.items():
        rows.append(profile_summary(name, provider_of(run, name, items),
                                    [{"status": i.status, "measures": i.measures} for i in own]))
        outcomes[name] = {i.task_id: bool(i.measures["success"]) for i in own
                          if i.status == TaskRunItem.Status.DONE and i.measures and "success" in i.measures}
    pairs = [paired_comparison(a, b, outcomes[a], outcomes[b]) for a, b in combinations(by_profile, 2)]
    return {"tasks": len({i.task_id for i in items}), "profiles": rows, "pairs": pairs}


def progress(run: TaskRun, items: list[TaskRunItem] | None = None) -> dict[str, int]:
    # Without the items at hand (the command's poll, twice a second): their statuses only, not their
    # measures, tasks and conversations.
    statuses = [i.status for i in items] if items is not None else list(run.items.values_list("status", flat=True))
    counts = {status: 0 for status in TaskRunItem.Status.values}
    for status in statuses:
        counts[status] += 1
    counts["total"] = len(statuses)
    counts["finished"] = counts["done"] + counts["cancelled"]
    counts["percent"] = int(round(100 * counts["finished"] / len(statuses))) if statuses else 0
    return counts


def changed_lately(items: list[TaskRunItem], seconds: float) -> list[TaskRunItem]:
    """The tasks running now, or started or ended within `seconds` (the cells a live frame carries)."""
    cutoff = timezone.now() - timedelta(seconds=seconds)
    return [i for i in items if i.status == TaskRunItem.Status.RUNNING
            or (i.finished_at is not None and i.finished_at >= cutoff) or (i.started_at is not None and i.started_at >= cutoff)]


@dataclass
class GridRow:
    task_id: int
    external_id: str
    query: str
    expected: list[str]
    cells: list[TaskRunItem | None]
    disagree: bool  # the profiles that finished it do not all agree on success
    failed: bool  # some profile finished it without success

    @property
    def passed_all(self) -> bool:
        return not self.failed


def grid(run: TaskRun, items: list[TaskRunItem], *, only: str = "") -> list[GridRow]:
    """One row per task, one cell per profile (in the run's order); `only` = failed | disagree."""
    names = [p["name"] for p in run.profiles]
    rows: dict[int, GridRow] = {}
    for item in items:
        row = rows.get(item.task_id)
        if row is None:
            row = rows[item.task_id] = GridRow(item.task_id, item.task.external_id, item.task.query, item.task.expected_tools,
                                               [None] * len(names), False, False)
        if item.profile_name in names:
            row.cells[names.index(item.profile_name)] = item
    for row in rows.values():
        outcomes = [bool(c.measures.get("success")) for c in row.cells
                    if c is not None and c.status == TaskRunItem.Status.DONE and c.measures]
        row.disagree = len(set(outcomes)) > 1
        row.failed = any(not o for o in outcomes)
    chosen = list(rows.values())
    if only == "failed":
        chosen = [r for r in chosen if r.failed]
    elif only == "disagree":
        chosen = [r for r in chosen if r.disagree]
    return chosen


CSV_FIELDS = ("task_id", "query", "expected_tools", "profile", "status", "conversation", "success", "first_call_success",
              "first_tool", "searches", "turns", "model_calls", "input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens", "tokens_estimated", "cost_usd", "wall_s",
              "errors", "end_reason", "simulated_calls")


def csv_text(items: list[TaskRunItem]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_FIELDS)
    for item in items:
        m = item.measures or {}
        writer.writerow([
            item.task.external_id, item.task.query, " ".join(item.task.expected_tools), item.profile_name, item.status,
            item.conversation_id or "", m.get("success", ""), m.get("first_call_success", ""), m.get("first_tool", ""),
            m.get("searches", ""), m.get("turns", ""), m.get("model_calls", ""), m.get("input_tokens", ""),
            m.get("cache_read_tokens", ""), m.get("cache_write_tokens", ""), m.get("output_tokens", ""),
            m.get("tokens_estimated", ""), "" if m.get("cost_usd") is None else m["cost_usd"], m.get("wall_s", ""),
            ";".join(f"{k}={v}" for k, v in (m.get("errors") or {}).items()), m.get("end_reason", ""),
            m.get("simulated_calls", ""),
        ])
    return out.getvalue()


def task_json(items: list[TaskRunItem]) -> list[dict[str, Any]]:
    return [{"task_id": i.task.external_id, "query": i.task.query, "expected_tools": i.task.expected_tools,
             "profile": i.profile_name, "status": i.status, "conversation": i.conversation_id, "measures": i.measures}
            for i in items]


# -- the chart: success against tokens (or cost) per profile ----------------------------------------------
@dataclass
class Point:
    label: str
    x: float
    y: float
    y_low: float
    y_high: float
    value_x: float
    value_y: float
    colour: int
    # Where its label's text starts (left end, baseline), placed clear of the other labels
    # (`place_labels`); `leader`: the label was moved off its point, a thin line joins them.
    label_x: float = 0.0
    label_y: float = 0.0
    leader: bool = False
    leader_x: float = 0.0  # the leader line's end, at the label
    leader_y: float = 0.0


@dataclass
class Chart:
    width: int
    height: int
    points: list[Point]
    x_label: str
    x_ticks: list[tuple[float, str]]
    y_ticks: list[tuple[float, str]]
    left: int
    top: int
    plot_w: int
    plot_h: int


def success_chart(rows: list[dict[str, Any]], *, by: str = "tokens", width: int = 560, height: int = 260) -> Chart | None:
    """Each profile a point: success (with its 95 % interval as a whisker) against input tokens or
    dollars per task, both axes from zero so a point's distance is its size."""
    key = "cost_usd_per_task" if by == "cost" else "input_tokens_per_task"
    shown = [r for r in rows if r["completed"] and (r.get(key) is not None)]
    if not shown:
        return None
    left, top, right, bottom = 56, 24, 90, 40  # room for the labels above and right of the points
    plot_w, plot_h = width - left - right, height - top - bottom
    top_x = max(float(r[key]) for r in shown) or 1.0
    top_x *= 1.1

    def fmt(value: float) -> str:
        return f"${value:.4f}" if by == "cost" else f"{value:,.0f}"

    points = []
    for index, row in enumerate(shown):
        value_x = float(row[key])
        low, high = row["success_ci"]
        points.append(Point(
            label=row["profile"], x=left + plot_w * value_x / top_x, y=top + plot_h * (1 - row["success"]),
            y_low=top + plot_h * (1 - low), y_high=top + plot_h * (1 - high), value_x=value_x, value_y=row["success"],
            colour=index % 8,  # the every-mode run's eight modes each their own
        ))
    place_labels(points, width=width, top=4, bottom=top + plot_h)
    x_ticks = [(left + plot_w * f, fmt(top_x * f)) for f in (0.0, 0.25, 0.5, 0.75, 1.0)]
    y_ticks = [(top + plot_h * (1 - v), f"{v:.0%}") for v in (0.0, 0.25, 0.5, 0.75, 1.0)]
    label = "dollars per task" if by == "cost" else "input tokens per task"
    return Chart(width, height, points, label, x_ticks, y_ticks, left, top, plot_w, plot_h)


LABEL_CHAR_PX = 6.2  # an 11 px label's average character width (agenteval chart CSS)
LABEL_LINE_PX = 13  # one label line's height: labels closer than this overlap
LABEL_GAP_PX = 9  # from the point's centre to its label


def place_labels(points: list[Point], *, width: int, top: float, bottom: float) -> None:
    """Give each point's label a place that overlaps no other label: beside the point (right of it,
    or left where the chart ends), moved down or up a line at a time while it would cover a label
    already placed. Points whose modes cost about the same sit on top of each other (eight modes at
    the same success, seven within a few per cent of the tokens): their labels stack, each joined
    to its point by a leader line. A label covers no other label and no point."""
    # The points themselves are in the way too: a label never covers another point's dot.
    placed: list[tuple[float, float, float, float]] = [(p.x - 7, p.y - 7, p.x + 7, p.y + 7) for p in points]

    def clear(box: tuple[float, float, float, float]) -> bool:
        x0, y0, x1, y1 = box
        return all(x1 <= a0 or x0 >= a1 or y1 <= b0 or y0 >= b1 for a0, b0, a1, b1 in placed)

    for point in sorted(points, key=lambda p: (p.y, p.x)):
        text_w = len(point.label) * LABEL_CHAR_PX
        left = point.x + LABEL_GAP_PX if point.x + LABEL_GAP_PX + text_w <= width else point.x - LABEL_GAP_PX - text_w
        left = max(left, 0.0)
        baseline = point.y - 8
        candidates = [baseline + sign * step * LABEL_LINE_PX for step in range(0, 40) for sign in ((1,) if step == 0 else (1, -1))]
        fits = [y for y in candidates if top + LABEL_LINE_PX - 3 <= y <= bottom + LABEL_LINE_PX]
        chosen = next((y for y in fits if clear((left, y - LABEL_LINE_PX + 3, left + text_w, y + 3))), baseline)
        placed.append((left, chosen - LABEL_LINE_PX + 3, left + text_w, chosen + 3))
        point.label_x, point.label_y, point.leader = left, chosen, chosen != baseline
        point.leader_x = left - 2 if left > point.x else left + text_w + 2
        point.leader_y = chosen - 4


def panel_context(run: TaskRun, items: list[TaskRunItem] | None = None) -> dict[str, Any]:
    """What the live panel shows (the page and each pushed frame render it alike): status, progress,
    the table per profile, the paired tests and the chart."""
    items = items if items is not None else items_of(run)
    data = report(run, items)
    charts = [chart for chart in (success_chart(data["profiles"], by="tokens"), success_chart(data["profiles"], by="cost"))
              if chart is not None]
    return {"run": run, "progress": progress(run, items), "report": data, "charts": charts}


# -- the "every loading mode" preset ------------------------------------------------------------------
def loading_modes() -> tuple[str, ...]:
    """The modes a task run over every loading mode sets side by side, in the order its table shows
    them: "off" (every tool sent up front), then each wire style's, in the registry's order (a style
    may play more than one: `WireStyle.loading_modes`). Anthropic's server-side search is left out:
    the offline demo agent cannot play it."""
    return ("off",) + tuple(mode for style in wire_styles() if not (style.vendor == ANTHROPIC and style.searches_on_server)
                            for mode in style.loading_modes())


def loading_mode_of(profile: AgentProfile) -> str:
    """Which of `loading_modes()` a profile runs (the server-side Anthropic search: "server"): its
    wire style's, on the wire its provider's vendor speaks."""
    try:
        if parse_mode(profile.tool_search_mode).kind == "false":
            return "off"
        settings = agent_settings(profile)
        if profile.provider == "openai":
            settings = settings_for_vendor(settings, OPENAI)
    except ValueError:
        return profile.wire_style
    return wire_style(settings.wire).loading_mode(settings)


def loading_mode_profiles() -> list[AgentProfile]:
    """One profile per loading mode, in `loading_modes()` order, for a task run that sets every mode
    side by side on the same tasks: per mode the plainest profile (flat announcement, the mode set
    explicitly, the oldest first). A mode no profile runs is left out."""
    chosen: dict[str, AgentProfile] = {}
    candidates = AgentProfile.objects.filter(is_subagent=False).order_by("pk")
    for profile in sorted(candidates, key=lambda p: (p.announcement_layout != AgentProfile.Layout.FLAT,
                                                     p.tool_search_mode not in ("true", "false"), p.pk)):
        mode = loading_mode_of(profile)
        if mode == "off" and profile.provider == "openai":
            continue  # "off" is the all-tools baseline on Anthropic's wire
        chosen.setdefault(mode, profile)
    return [chosen[mode] for mode in loading_modes() if mode in chosen]
