"""The findings page as a reader sees it: rendered in headless Chromium, plus its CLIs.

The page is built from the committed summaries with two cheap figures drawn (drawing all of
them takes a minute; ``python -m figures report`` does, and exits 1 if one fails). Chromium
loads it, the page's own check script records broken images, dead in-page links, the smallest
font and horizontal overflow on ``<body data-*>``, and a screenshot is taken. On CI (where
``.ci/run`` installs Debian's ``chromium`` and sets ``SBT_REQUIRE_CHROMIUM=1``) a missing
browser fails the test instead of skipping it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from figures.__main__ import main as figures_main
from figures.report import build_report
from figures.report.sources import SOURCES
from figures.report.summaries import load_numbers

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars"]  # fmt: skip
DRAWN = ("sam_entropy", "entropy_toy")


def _chromium(tmp_path, *args, timeout=120) -> str:
    if CHROMIUM is None:
        if os.environ.get("SBT_REQUIRE_CHROMIUM"):
            pytest.fail("chromium is not installed (apt-get install chromium)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    cmd = [CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.fixture(scope="session")  # not torn down when an xdist worker switches modules
def page(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    rep = build_report(out, figures=DRAWN)
    return out, rep


def test_page_renders_every_claim_with_working_images_and_links(page, tmp_path):
    out, rep = page
    assert not rep.failed_figures and set(rep.figures) == set(DRAWN)
    url = (out / "index.html").as_uri()
    dom = _chromium(tmp_path, "--window-size=1400,1000", "--virtual-time-budget=15000",
                    "--dump-dom", url)  # fmt: skip
    body = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', re.search(r"<body[^>]*>", dom).group(0)))
    assert body.get("checked") == "yes", body
    assert body["broken-images"] == "0" and int(body["images"]) >= 2 * len(DRAWN)
    assert body["dead-links"] == "0"
    assert int(body["rows"]) == len(rep.rows)
    assert float(body["min-font-px"]) >= 12  # readable
    assert int(body["overflow-px"]) <= 0  # no sideways scrolling at a laptop width
    for r in rep.rows:  # every claim row, with its verdict
        assert f'id="claim-{r.claim.id}"' in dom
    assert dom.count('class="verdict') >= len(rep.rows)
    md = (out / "REPORT.md").read_text()
    assert md.count("\n| ") >= len(rep.rows) and "## Seed 004" in md


def test_screenshot_is_a_readable_page(page, tmp_path):
    from matplotlib.image import imread

    out, _ = page
    shot = tmp_path / "shot.png"
    _chromium(tmp_path, "--window-size=1400,1800", "--virtual-time-budget=15000",
              f"--screenshot={shot}", (out / "index.html").as_uri())  # fmt: skip
    img = imread(shot)[..., :3]
    assert img.shape[:2] == (1800, 1400)
    ink = (img.mean(-1) < 0.5).mean()  # dark pixels: text and table lines
    assert 0.01 < ink < 0.5  # neither blank nor a black page
    colour = (img.max(-1) - img.min(-1) > 0.15).mean()  # the verdict badges are coloured
    assert colour > 0.002


def test_self_contained_page_embeds_its_images(tmp_path):
    rep = build_report(tmp_path / "one", figures=DRAWN[:1], embed=True)
    html = rep.html.read_text()
    assert "data:image/png;base64," in html and not (tmp_path / "one" / "img").exists()


def test_report_cli_errors_are_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        figures_main(["report", "--out", "/proc/nope"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "--out" in err and len(err.splitlines()) == 1
    with pytest.raises(SystemExit) as e:  # an existing results folder (a fresh clone has none)
        figures_main(["summaries", "--only", "bogus", "--results", str(tmp_path)])
    assert e.value.code == 2 and "bogus" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        figures_main(["summaries", "--results", str(tmp_path / "none")])
    assert e.value.code == 2 and "is not a folder" in capsys.readouterr().err


def test_figures_draws_a_summarised_figure_without_computing(tmp_path, capsys):
    results = tmp_path / "results"
    results.mkdir()
    assert figures_main(["--only", "sam_entropy", "--out", str(tmp_path / "out"),
                         "--results", str(results)]) == 0  # fmt: skip
    assert "drawn from the committed summary" in capsys.readouterr().out
    assert (tmp_path / "out" / "sam_entropy.png").exists()
    assert not any(results.iterdir())  # nothing computed, nothing written to results/


def test_summaries_round_trip_through_the_writer(tmp_path):
    """``python -m figures summaries`` on results rebuilt from the committed summaries writes
    the same numbers (the writer and the committed files share one schema)."""
    from figures.report import store
    from figures.report.summaries import write_summaries

    names = ["sam_entropy", "entropy_toy", "markov_coupling"]
    rels = [rel for n in names for rel in SOURCES[n].files]
    store.hydrate(rels, tmp_path / "results")
    status = write_summaries(tmp_path / "results", root=tmp_path / "sum", only=names,
                             progress=lambda _: None)  # fmt: skip
    assert all(v == "written" for v in status.values())
    fresh = load_numbers(tmp_path / "sum")
    committed = load_numbers()
    for n in names:
        assert _keys(fresh[n]) == _keys(committed[n]), n


def _keys(x, prefix=""):
    if isinstance(x, dict):
        return {k for key, v in x.items() for k in _keys(v, f"{prefix}/{key}")} | {prefix}
    return {prefix}
