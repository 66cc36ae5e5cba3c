"""Measure the inspector's response time with many tools (a benchmark that prints numbers).

    .venv/bin/python -m playground.bench.inspector [--tools 10000] [--requests 5] [--verbose]

Runs on a throwaway test database (never the configured one): loads the demo catalog, copies its
tools under numbered server names until `--tools` is reached, then requests the inspector with the
test client — once per query to warm the per-process caches, then `--requests` timed rounds — and
prints the median and p90 of full pages and of htmx result fragments.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import replace
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "playground.settings")
django.setup()  # the models below need the app registry

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import setup_test_environment, teardown_test_environment  # noqa: E402
from django.urls import reverse  # noqa: E402

from playground.engine.catalog_io import load_tools  # noqa: E402
from playground.engine.evaluate import percentile  # noqa: E402
from playground.registry import adapter  # noqa: E402
from playground.registry.demo_data import CATALOGS  # noqa: E402
from playground.registry.models import Tool  # noqa: E402

QUERIES = ["create github issue", "+slack send message", "weather forecast", "read pdf file", "select:Read,Write", "kubernetes pods logs"]


class InspectorBench:
    def __init__(self, verbose: bool = False) -> None:
        self.verbose = verbose

    def run(self, tools: int, requests: int) -> None:
        setup_test_environment()
        old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
        try:
            self._run(tools, requests)
        finally:
            connection.creation.destroy_test_db(old_name, verbosity=0)
            teardown_test_environment()

    def _run(self, target: int, rounds: int) -> None:
        call_command("load_demo_data", "--skip-servers", stdout=sys.stdout if self.verbose else _Null())
        self._grow(target)
        total = Tool.objects.filter(enabled=True).count()
        user = get_user_model().objects.create_user("bench", password="bench-password-1")
        client = Client()
        client.force_login(user)
        url = reverse("registry:inspector")
        fragment_headers = {"HX-Request": "true", "HX-Target": "inspector-results"}

        started = time.perf_counter()
        client.get(url, {"q": QUERIES[0]})
        cold = time.perf_counter() - started
        for query in QUERIES:  # warm: catalog, permission filter and backend index are per-process caches
            client.get(url, {"q": query}, headers=fragment_headers)

        pages: list[float] = []
        fragments: list[float] = []
        for _ in range(rounds):
            for query in QUERIES:
                started = time.perf_counter()
                response = client.get(url, {"q": query})
                pages.append(time.perf_counter() - started)
                assert response.status_code == 200, response.status_code
                started = time.perf_counter()
                response = client.get(url, {"q": query}, headers=fragment_headers)
                fragments.append(time.perf_counter() - started)
        lists: list[float] = []
        list_url = reverse("registry:tool_list")
        for params in ({}, {"q": "github"}, {"deferred": "yes", "page": "40"}) * rounds:
            started = time.perf_counter()
            client.get(list_url, params)
            lists.append(time.perf_counter() - started)
        print(f"inspector with {total} enabled tools, {len(pages)} requests each:")
        print(f"  first request (cold caches, builds catalog and index): {cold * 1000:.0f} ms")
        print(f"  full page      median {_ms(statistics.median(pages))}  p90 {_ms(percentile(pages, 90))}")
        print(f"  htmx fragment  median {_ms(statistics.median(fragments))}  p90 {_ms(percentile(fragments, 90))}")
        print(f"tool list page   median {_ms(statistics.median(lists))}  p90 {_ms(percentile(lists, 90))} ({len(lists)} requests)")

    def _grow(self, target: int) -> None:
        base = [t for path in CATALOGS for t in load_tools(path)]
        have = Tool.objects.count()
        rows: list[Tool] = []
        copy = 1
        while have + len(rows) < target:
            for tool in base:
                if have + len(rows) >= target:
                    break
                server = f"{tool.server}{copy}"
                name = tool.name.replace(f"mcp__{tool.server}__", f"mcp__{server}__", 1)
                if len(name) > 64:
                    continue
                rows.append(adapter.fill_tool_row(Tool(), replace(tool, name=name, server=server), source=Tool.Source.IMPORTED))
            copy += 1
        Tool.objects.bulk_create(rows, batch_size=1000)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


class _Null:
    def write(self, *args: Any, **kwargs: Any) -> None:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m playground.bench.inspector", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=5, help="Timed rounds over the query list.")
    parser.add_argument("--verbose", action="store_true", help="also print what loading the demo data prints")
    args = parser.parse_args(argv)
    InspectorBench(verbose=args.verbose).run(args.tools, args.requests)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
