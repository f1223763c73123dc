"""Text a tool agent only relays -- a page, a file, a program's output -- is no act of the agent's own.

The messages are hand-written in the shapes Magentic-One's agents post (MultimodalWebSurfer's screenshot report with
its metadata and OCR text, a text browser's / FileSurfer's ``Address: ... Title: ...`` page, ComputerTerminal's
program output); no real run was read to write them.
"""

from __future__ import annotations

import json

import pytest

from evoharness.diagnosis.labeller import Labeller
from evoharness.diagnosis.webtext import ToolText, refusal
from evoharness.traces.models import Trajectory

TASK = "What is the population of the smallest county seat in Washington state, per the 2020 census?"


def _log(turns: list[tuple[str, str]]) -> Trajectory:
    msgs = [{"role": "user", "content": TASK}]
    msgs += [{"role": "assistant", "name": n, "content": c} for n, c in turns]
    return Trajectory(id="m1", task_id="m1", task=TASK, messages=msgs, final_answer=turns[-1][1],
                      meta={"failure_only": True})


def _surfer(action: str, title: str, url: str, ocr: str, meta: str = "") -> str:
    """A MultimodalWebSurfer report: the action, the screenshot line, the page's metadata, the OCR text."""
    meta = meta or '{\n    "meta_tags": {\n        "viewport": "width=device-width, initial-scale=1"\n    }\n}'
    return (f"{action}\n\nHere is a screenshot of [{title}]({url}). The viewport shows 100% of the webpage, and is "
            f"positioned at the top of the page.\nThe following metadata was extracted from the webpage:\n\n{meta}\n"
            f"Automatic OCR of the page screenshot has detected the following text:\n\n{ocr}")


def _run(surfer_reply: str, name: str = "WebSurfer") -> list[tuple[str, int]]:
    t = _log([
        ("Orchestrator", "Please open the Washington State county seats list and read off the smallest one."),
        (name, surfer_reply),
        ("Orchestrator", "Please report the population figure you found."),
        (name, "I scrolled down one page in the browser."),
        ("Orchestrator", "FINAL ANSWER: Coupeville"),
    ])
    return [(s.id, s.step) for s in Labeller().label(t).signals if s.id == "F2.guardrail"]


CLOUDFLARE_BLOCK = _surfer(
    "I typed 'Washington county seats population 2020' into the browser search bar.",
    "Attention Required! | Cloudflare", "https://www.citypopulation.de/en/usa/washington/",
    "Please enable cookies.\nSorry, you have been blocked\nYou are unable to access citypopulation.de\n"
    "Why have I been blocked?\nThis website is using a security service to protect itself from online attacks.\n"
    "Cloudflare Ray ID: 8a1f2c3d4e5f6a7b • Your IP: Click to reveal • Performance & security by Cloudflare")
CHALLENGE = _surfer(
    "I clicked 'List of counties in Washington'.", "Just a moment...", "https://www.counties.org/wa",
    "www.counties.org\nVerify you are human by completing the action below.\n"
    "www.counties.org needs to review the security of your connection before proceeding.")
GOOGLE_SORRY = _surfer(
    "I typed 'smallest county seat Washington' into the browser search bar.",
    "https://www.google.com/sorry/index?continue=https://www.google.com/search", "https://www.google.com/sorry/index",
    "About this page\nOur systems have detected unusual traffic from your computer network. This page checks to see "
    "if it's really you sending the requests, and not a robot.\nI'm not a robot\nreCAPTCHA\nPrivacy - Terms")
RECAPTCHA_FOOTER = _surfer(
    "I clicked 'Island County, Washington'.", "Island County, WA - Official Website", "https://www.islandcountywa.gov/",
    "Island County\nCounty Seat: Coupeville\nPopulation (2020): 86,857\nContact Us\nSubscribe to our newsletter\n"
    "Email address\nSubmit\nThis site is protected by reCAPTCHA and the Google Privacy Policy and Terms of Service "
    "apply.")
CLOUDFLARE_ARTICLE = _surfer(
    "I clicked 'Cloudflare outage disrupts county websites'.",
    "Cloudflare outage disrupts county websites across the Northwest - Seattle Times",
    "https://www.seattletimes.com/business/cloudflare-outage/",
    "Cloudflare outage disrupts county websites across the Northwest\nA configuration error at Cloudflare, the "
    "web security company, left dozens of county sites unreachable on Tuesday, while roads blocked by snow kept "
    "offices in Coupeville closed. Cloudflare said the captcha service was not affected.\n"
    "Performance & security by Cloudflare")


@pytest.mark.parametrize("reply", [CLOUDFLARE_BLOCK, CHALLENGE, GOOGLE_SORRY], ids=["blocked", "challenge", "google"])
def test_a_block_or_challenge_page_the_surfer_landed_on_is_a_guardrail_at_that_step(reply):
    assert _run(reply) == [("F2.guardrail", 2)]


@pytest.mark.parametrize("reply", [RECAPTCHA_FOOTER, CLOUDFLARE_ARTICLE],
                         ids=["recaptcha-footer", "cloudflare-article"])
def test_a_word_that_only_appears_on_an_ordinary_page_is_no_guardrail(reply):
    # before: "captcha" in the reCAPTCHA notice, "cloudflare" / "blocked by" in the article fired F2.guardrail
    assert _run(reply) == []


def test_a_query_the_surfer_typed_is_no_refusal_but_its_own_report_of_one_is():
    typed = _surfer("I typed 'captcha blocked by cloudflare' into the browser search bar.",
                    "captcha blocked by cloudflare - Search", "https://www.bing.com/search?q=captcha",
                    "About 1,230,000 results\nHow to fix Cloudflare captcha loops - Reddit")
    assert _run(typed) == []
    assert _run("I could not read the page: access was denied and the site asks me to solve a CAPTCHA.") == [
        ("F2.guardrail", 2)]


def test_a_page_dump_is_a_block_page_by_its_title_or_its_challenge_not_by_its_subject():
    radware = ("Address: https://iopscience.iop.org/article/10.3847/2041-8213/acd54b\n"
               "Title: Radware Bot Manager Captcha\nViewport position: Showing page 1 of 1.\n=======================\n"
               "We apologize for the inconvenience...\nTo ensure we keep this website safe, please can you confirm you "
               "are a human by ticking the box below.")
    assert _run(radware, name="WebServing_Expert") == [("F2.guardrail", 2)]
    wiki = ("Address: https://en.wikipedia.org/wiki/CAPTCHA\nTitle: CAPTCHA - Wikipedia\n"
            "Viewport position: Showing page 1 of 9.\n=======================\nA CAPTCHA is a type of "
            "challenge-response test used in computing to determine whether the user is human, in order to deter bot "
            "attacks. Cloudflare and others sell bot detection; a user who fails it is blocked by the site.")
    assert _run(wiki, name="WebServing_Expert") == []
    file = ("Address: file:///workspace/notes/outage_report.txt\nViewport position: Showing page 1 of 1.\n"
            "=======================\nIncident 14: requests to the vendor API returned 403 Forbidden and were "
            "blocked by Cloudflare; access denied for the reporting job.")
    assert _run(file, name="FileSurfer") == []


def test_a_program_that_reports_its_request_refused_is_a_guardrail():
    # before: only the words "403 forbidden" counted, not urllib's "HTTP Error 403: Forbidden"
    out = ("The script ran, then exited with Unix exit code: 1\nIts output was:\nTraceback (most recent call last):\n"
           "  File \"/workspace/tmp_code_1.py\", line 4, in <module>\n    html = urlopen(req).read()\n"
           "urllib.error.HTTPError: HTTP Error 403: Forbidden")
    assert _run(out, name="ComputerTerminal") == [("F2.guardrail", 2)]
    # what it printed of a page is the page's: a subject, not a refusal
    printed = ("The script ran, then exited with Unix exit code: 0\nIts output was:\nCloudflare blog: How we fixed "
               "captcha loops\nAccess denied: county offices closed, roads blocked by snow")
    assert _run(printed, name="ComputerTerminal") == []


def test_a_tool_message_splits_into_its_own_words_the_title_and_the_page():
    parts = ToolText.of(RECAPTCHA_FOOTER)
    assert parts.own == "I clicked 'Island County, Washington'.\n\n"
    assert parts.title == "Island County, WA - Official Website"
    assert parts.page.startswith(" 100% of the webpage") and parts.page.endswith("Terms of Service apply.")
    assert refusal("Address: https://x.org/\nTitle: 403 Forbidden\nViewport position: Showing page 1 of 1.\n"
                   "=======================\n403 Forbidden\nnginx") == "title '403 Forbidden'"
    assert refusal("Address: https://x.org/\nTitle: How to fix a 403 Forbidden error\nViewport position: Showing page "
                   "1 of 4.\n=======================\nA 403 Forbidden error means ...") is None


def _ledger(satisfied: bool) -> str:
    return "Updated Ledger:\n" + json.dumps({
        "is_request_satisfied": {"reason": "The team has the list.", "answer": satisfied},
        "is_in_loop": {"reason": "r", "answer": False},
        "is_progress_being_made": {"reason": "r", "answer": True}}, indent=2)


def test_a_page_that_says_no_results_is_no_report_of_failure_by_the_surfer():
    # the page a surfer shows is not its report: "No results found" on it said nothing of the surfer, yet it made
    # ending the run the orchestrator's call (F4.accepted_report at the ledger); the report is what was relied on
    page = ("Address: https://www.sos.wa.gov/elections/county-seats\n"
            "Title: County seats - Washington Secretary of State\nViewport position: Showing page 1 of 2.\n"
            "=======================\nNo results found for \"smallest\". Showing all 39 county seats.\n"
            "Asotin (Asotin County)\nCathlamet (Wahkiakum County)\nCoupeville (Island County)\n\n"
            "Election offices are open 8:30-4:30.")
    own = "I could not find a population table on the county seats page."

    def accepted(report: str, name: str) -> tuple[str, int]:
        t = _log([
            ("Orchestrator", "Please open the Washington county seats list and read off the smallest one."),
            (name, report),
            ("Orchestrator", _ledger(True)),
            ("Orchestrator", "FINAL ANSWER: Pomeroy"),
        ])
        sig = next(s for s in Labeller().label(t).signals if s.id == "F4.accepted_report")
        return sig.id, sig.step

    assert accepted(page, "WebSurfer") == ("F4.accepted_report", 2)  # before: 3, the ledger
    file = page.replace("Address: https://www.sos.wa.gov/elections/county-seats",
                        "Address: file:///workspace/county_seats.txt")
    assert accepted(file, "FileSurfer") == ("F4.accepted_report", 2)
    # the surfer's own words that it did not get there still make ending the run the orchestrator's call
    assert accepted(_surfer(own, "County seats - Washington Secretary of State", "https://www.sos.wa.gov/",
                            "No results found"), "WebSurfer") == ("F4.accepted_report", 3)


def test_a_surfers_page_report_under_any_name_is_a_tools_output_not_a_claim():
    # AutoGen 0.4 lets a MultimodalWebSurfer be named anything: as "WebAgent" (head noun "web": a reasoning agent) its
    # page's OCR text was read as the agent's claims -- "example data" and the page's figures fired F1.unsupported_fact
    report = _surfer(
        "I clicked 'Census data tables'.", "Washington city populations - Census Reporter",
        "https://censusreporter.org/data/table/?table=B01003",
        "Table B01003: Total Population\nExample data shown below for illustration\nCoupeville town 1,942\n"
        "Pomeroy city 1,389\nCathlamet town 560")
    t = _log([
        ("Orchestrator", "Please find the census table of Washington city populations."),
        ("WebAgent", report),
        ("Orchestrator", "FINAL ANSWER: Cathlamet"),
    ])
    assert "F1.unsupported_fact" not in {s.id for s in Labeller().label(t).signals}
    # a FileSurfer-shaped page without a title ("Address: ... Viewport position: ...") likewise
    page = ("Address: file:///workspace/populations.csv\nViewport position: Showing page 1 of 1.\n"
            "=======================\nplace,population\nsample data,0\nCoupeville,1942\nPomeroy,1389\n")
    t = _log([("Orchestrator", "Please read the populations file."), ("file_reader", page),
              ("Orchestrator", "FINAL ANSWER: Pomeroy")])
    assert "F1.unsupported_fact" not in {s.id for s in Labeller().label(t).signals}


def test_a_fabrication_word_the_agent_quotes_from_a_page_or_file_is_the_pages():
    # the README a file surfer read says its figures are simulated; the coder quoting that sentence makes nothing up
    readme = ("Address: file:///workspace/county-data/README.md\nTitle: README\nViewport position: Showing page 1 of 1."
              "\n=======================\n# County data\nThe figures in sample.csv are simulated for demonstration "
              "purposes only; the real 2020 counts are in census2020.csv.\n")
    quoting = ("The README warns: \"The figures in sample.csv are simulated for demonstration purposes only\", so I "
               "will read census2020.csv instead.")
    own = "The file is missing, so let's simulate the counts for demonstration and proceed."

    def fab(reply: str) -> list[int]:
        t = _log([
            ("Orchestrator", "Please read the county data repository."),
            ("FileSurfer", readme),
            ("Orchestrator", "Coder, which file holds the 2020 counts?"),
            ("Coder", reply),
            ("Orchestrator", "FINAL ANSWER: Coupeville"),
        ])
        return [s.step for s in Labeller().label(t).signals if s.id == "F1.unsupported_fact"]

    assert fab(quoting) == []  # before: 4, "works from simulated or assumed data ('simulated')"
    assert fab(own) == [4]


def test_a_block_pages_words_quoted_in_a_long_page_are_the_pages_subject():
    # a results page lists other pages: one of them an indexed Cloudflare block page; the surfer was not blocked
    results = "\n".join(
        f"{name}\nhttps://{site}\n{snippet}" for name, site, snippet in [
            ("Island County, Washington - Wikipedia", "en.wikipedia.org/wiki/Island_County,_Washington",
             "Island County is a county in the U.S. state of Washington. Its county seat is Coupeville, and its "
             "largest city is Oak Harbor. As of the 2020 census, the population was 86,857."),
            ("Attention Required! | Cloudflare", "www.countyseats.example/wa",
             "Sorry, you have been blocked. You are unable to access countyseats.example. Why have I been blocked? "
             "This website is using a security service to protect itself from online attacks."),
            ("Coupeville, Washington - Wikipedia", "en.wikipedia.org/wiki/Coupeville,_Washington",
             "Coupeville is a town on Whidbey Island, in Island County, Washington, United States. The population was "
             "1,942 at the 2020 census. It is the county seat of Island County."),
            ("List of counties in Washington - Wikipedia", "en.wikipedia.org/wiki/List_of_counties_in_Washington",
             "There are 39 counties in the U.S. state of Washington. Washington was created from the western portion "
             "of Oregon Territory, which had been ceded by the United Kingdom in 1846."),
            ("Washington county seats by population - Census Reporter", "censusreporter.org/topics/county-seats",
             "Census Reporter makes it easy to explore the 2020 census and American Community Survey figures for "
             "every county seat in Washington, from Seattle to Pomeroy and Cathlamet."),
            ("Smallest towns in Washington state - WorldAtlas", "www.worldatlas.com/cities/smallest-towns-wa",
             "From Krupp to Lamont, the smallest incorporated towns of Washington have fewer than 100 residents; "
             "several are county seats of rural counties in the east of the state."),
        ])
    search = _surfer("I typed 'Washington county seats population 2020' into the browser search bar.",
                     "Washington county seats population 2020 - Search",
                     "https://www.bing.com/search?q=Washington+county+seats+population+2020",
                     "Microsoft Bing\nSEARCH\nCOPILOT\nIMAGES\nVIDEOS\nAbout 412,000 results\n" + results)
    assert _run(search) == []  # before: F2.guardrail at 2 ("you have been blocked", the second result's snippet)
    assert _run(CLOUDFLARE_BLOCK) == [("F2.guardrail", 2)]
