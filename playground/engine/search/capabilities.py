"""Capabilities beside topics: a request's implied generic needs, answered by the catalog's own
generic tools.

Why: a request names its *topic* ("the Bitcoin price", "employees who joined last year") and
only implies the *capabilities* it needs to get there ("…and save it in /root/bitcoin.md" needs
a tool that writes a file; "directions from the station to the museum" needs a geocoder). Tools
named after the topic share words with the request and outrank the generic tool that does the
implied step, which shares none. A better similarity does not fix this: the generic tool is
simply not *about* the request.

How: each capability below is a pair of
  - cues: the request's structure and verbs that imply it (a file path or "save … to", a
    street address or "directions", a URL or "click", …), read from the request alone;
  - a description of the capability in the words tools use for it ("write content to a file").
A request that shows a cue gets the capability; the catalog is then searched *with the
description*, by the same backend that ranks the request, and its best tools for it (ranked once
per catalog and cached) are the capability's answers. Among those, the one the request itself
scores best is put into the top k at a fixed slot (calibrated on the development split), below
the topic tools ranked above it, which keep their places. No tool, server or toolset is named
anywhere: what a catalog offers for "write content to a file" is whatever that catalog's own
text says. A catalog with no tool clearly for the capability (its best cosine to the
description under `CAPABILITY_MIN_COSINE`) gets nothing from it.

Chains (a deliverable made in steps): a request for a *document* ("summarize it in a PPT in
/root/ppt/apple.pptx", "a PDF report titled report.pdf") needs more than one tool: the document is
created, filled and saved, and a catalog's document servers split those into tools of their own
(create_presentation, add_slide, save_presentation). One slot placed only the first step, and
the request's words pull in *other* tools about the same kind of document (a .pptx reader)
rather than the later steps, which share no word with it. So a document-type variant names its
later steps too (`CapabilityCue.chain`, in tool words: "add a paragraph of text to the document",
"save the presentation to a file"); hybrid answers each step among the tools of the server of the
first step's tool — a document lives on the server that made it, so another server's "save" is no
step of this chain — and places it where it displaces least: in the place of a top-k tool about the
same kind of document that is no step of the chain, or in the capability's slot when the first
step was already in the top k (hybrid `capability_chain`, "kin"). A step the server has no tool
for (cosine under `chain_min_cosine`) is left out; nothing is placed for a plain file ("write
content to a file" is one step).

Only natural-language requests are read for capabilities (keyword-style queries of a few words
carry no structure to read): see `natural_request`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from playground.engine.search.text import natural_request


@dataclass(frozen=True)
class Capability:
    key: str
    label: str  # for people: "produce a file"
    description: str  # what the catalog is searched with (the words tools use for it)
    cues: re.Pattern[str]  # what in a request implies it
    # More precise readings: the first whose pattern the request matches gives the description
    # the catalog is searched with instead (a PowerPoint file needs another tool than a text file).
    # Each variant may also name the later steps of producing that kind of document (add content,
    # save it): the chain, answered among the first step's server (hybrid `capability_chain`).
    variants: tuple[tuple[re.Pattern[str], str, tuple[str, ...]], ...] = ()


_FILE_EXTENSIONS = r"(?:md|markdown|txt|csv|tsv|json|jsonl|html?|xml|ya?ml|log|docx?|xlsx?|pptx?|pdf|png|jpe?g|svg|py|js|ts|sh)"

CAPABILITIES: tuple[Capability, ...] = (
    Capability(
        "produce-file",
        "produce a file",
        "write content to a file on disk, creating or overwriting the file",
        re.compile(
            # a file path with an extension, or "save/write/export … to/in/as … file/folder/path", or a
            # producing verb before a file name
            r"(?:^|[\s\"'(])(?:~|\.{1,2})?/(?:[\w.-]+/)*[\w.-]+\.%s\b" % _FILE_EXTENSIONS
            + r"|\b(?:save|saving|saved|write|writing|export|exporting|store|storing|output)\b[^.;!?]{0,80}?"
            r"\b(?:to|in|into|as|under|at)\b[^.;!?]{0,60}?(?:\bfiles?\b|\bfolder\b|\bdirectory\b|\bdisk\b|/|\.%s\b)" % _FILE_EXTENSIONS
            # a producing verb, then a file name with an extension: "generate a PDF report titled report.pdf"
            + r"|\b(?:generate|generating|create|creating|make|produce|compile|prepare|draft)\b[^.;!?]{0,80}?\b[\w-]+\.%s\b" % _FILE_EXTENSIONS,
            re.IGNORECASE,
        ),
        (
            (re.compile(r"\.pptx?\b|\b(?:ppt|powerpoint|presentation|slides|slide deck)\b", re.IGNORECASE), "create a new PowerPoint presentation",
             ("add a slide with a title and text to the presentation", "save the presentation to a file")),
            (re.compile(r"\.xlsx?\b|\b(?:excel|spreadsheet|workbook)\b", re.IGNORECASE), "create a new Excel workbook",
             ("write data to the cells of a worksheet", "save the workbook to a file")),
            (re.compile(r"\.docx?\b|\bword document\b", re.IGNORECASE), "create a new Word document",
             ("add a paragraph of text to the document", "save the document to a file")),
            (re.compile(r"\.pdf\b|\bpdf\b", re.IGNORECASE), "create a new PDF document",
             ("add a paragraph of text to the document", "save the document as a PDF file")),
        ),
    ),
    Capability(
        "locate",
        "locate a place",
        "find a location on a map: geocode an address or place name to coordinates, nearby places and directions",
        re.compile(
            r"\b(?:address(?:es)?|coordinates|latitude|longitude|geocod\w*|nearby|near me|nearest|closest|"
            r"directions?|route|driving|walking distance|distance (?:between|from)|how far|located|location of|where is)\b",
            re.IGNORECASE,
        ),
    ),
    Capability(
        "current-time",
        "know the current date or time",
        "get the current date and time in a time zone",
        re.compile(
            r"\b(?:today|today's|tonight|tomorrow|yesterday|current (?:date|time|day)|right now|what time|what day|"
            r"this (?:week|weekend|month|year)|next (?:week|weekend|month|year)|days? (?:left|until|remaining)|how long until)\b",
            re.IGNORECASE,
        ),
    ),
    Capability(
        "compute",
        "compute a value",
        "calculate the result of a mathematical expression",
        re.compile(
            r"\b(?:calculate|calculating|compute|computing|sum of|total cost|average|percentage|multiply|divided by|"
            r"how much (?:will|would|does|do|is)|square root)\b",
            re.IGNORECASE,
        ),
    ),
    Capability(
        "browse",
        "open a web page",
        "open a web page in a browser, navigate to a URL and read the page content",
        re.compile(
            r"https?://\S+|\bwww\.\S+|\b(?:website|web ?page|webpage|web site|browser|click|navigate to|log ?in to)\b",
            re.IGNORECASE,
        ),
    ),
    Capability(
        "web-search",
        "search the web",
        "search the internet with a web search engine and return the results",
        re.compile(
            r"\b(?:search (?:the )?(?:web|internet|online)|search online|look (?:it |this |them )?up|google|"
            r"latest news|recent news|news about|find (?:out|information))\b",
            re.IGNORECASE,
        ),
    ),
)
BY_KEY = {capability.key: capability for capability in CAPABILITIES}


@dataclass(frozen=True)
class CapabilityCue:
    """A capability a request implies, and the words that imply it."""

    capability: Capability
    evidence: str  # the request's own words that showed the cue
    description: str = ""  # what the catalog is searched with (a variant's, else the capability's)
    chain: tuple[str, ...] = ()  # the later steps of producing the deliverable (a variant's), if any

    def __post_init__(self) -> None:
        if not self.description:
            object.__setattr__(self, "description", self.capability.description)


def detect(query: str, keys: frozenset[str] | None = None) -> list[CapabilityCue]:
    """The capabilities `query` implies (in `CAPABILITIES` order), each with its evidence; none
    for a query that is not a natural-language request. `keys`: only these capabilities."""
    if not natural_request(query):
        return []
    cues = []
    for capability in CAPABILITIES:
        if keys is not None and capability.key not in keys:
            continue
        found = capability.cues.search(query)
        if found:
            description, chain = next(
                ((described, steps) for pattern, described, steps in capability.variants if pattern.search(query)), (capability.description, ())
            )
            cues.append(CapabilityCue(capability, " ".join(found.group(0).split())[:80], description, chain))
    return cues
