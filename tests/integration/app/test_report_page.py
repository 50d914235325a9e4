"""The HTML report as people open it, in headless Chromium at 1,024 and 1,600 px (issue 45, "vpa report as
a page people want to open"): the page fits the window (no element reaches past its right edge, nothing
scrolls sideways), sorting by savings, filtering by namespace and by savings, and hiding columns work
from the page alone, each workload has a chart of its pods' requests against the target and bounds, the
summary reads "1 container" (not "1 containers"), the ConfigUnsupported message of a VPA whose target is
missing is shown, and quantities read as kubectl prints them. The check runs in the page: a script
appended to a copy of it measures the DOM and writes what it found into the DOM the browser dumps.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.integration.app.test_report import _cluster_with_vpas, _report
from tests.integration.components.recommender_helpers import VPAS, vpa
from vpa.sim import SimCluster

CHECK = """
<script>
(function(){
  function visible(el){ return !el.closest('.hidden') && el.getClientRects().length > 0; }
  function overflow(){
    var width = document.documentElement.clientWidth, wide = [];
    document.querySelectorAll('body *').forEach(function(el){
      if (!visible(el)) return;
      var box = el.getBoundingClientRect();
      if (box.width > 0 && box.right > width + 0.5) wide.push(el.tagName + '#' + el.id + '.' + el.className);
    });
    return {scrollWidth: document.documentElement.scrollWidth, clientWidth: width, wide: wide.slice(0, 10)};
  }
  function rows(){
    return Array.prototype.filter.call(document.querySelectorAll('#vpas tr.vpa-row'), visible)
      .map(function(r){ return r.dataset.vpa; });
  }
  function choose(id, value){
    var el = document.getElementById(id); el.value = value; el.dispatchEvent(new Event('change'));
  }
  var out = {overflow: overflow(), summary: document.getElementById('summary').textContent};
  var th = document.querySelector('#vpas th[data-column="cpu-diff"]');
  th.click(); out.ascending = rows();
  th.click(); out.descending = rows();
  choose('filter-namespace', 'default'); out.defaultOnly = rows();
  out.workloadsShown = Array.prototype.filter.call(document.querySelectorAll('div.workload'), visible)
    .map(function(d){ return d.dataset.vpa; });
  choose('filter-namespace', ''); choose('filter-savings', 'over'); out.over = rows();
  choose('filter-savings', 'under'); out.under = rows();
  choose('filter-savings', '');
  var box = document.querySelector('input.column-toggle[value="limits"]');
  box.checked = false; box.dispatchEvent(new Event('change'));
  out.limitCellsShown = Array.prototype.filter.call(
    document.querySelectorAll('#vpas .col-limits'), visible).length;
  out.limitCells = document.querySelectorAll('#vpas .col-limits').length;
  out.overflowAfter = overflow();
  var pre = document.createElement('pre'); pre.id = 'check'; pre.style.whiteSpace = 'pre-wrap';
  pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
})();
</script>
"""


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("report")
    target = folder / "report.html"

    async def build() -> None:
        async with SimCluster(nodes=1, node_cpu="8", node_memory="32Gi") as cluster:
            await _cluster_with_vpas(cluster)
            # A VPA whose target does not exist, with a long name: its reason must show, and fit.
            await cluster.store.create(VPAS, vpa("ghost-with-a-rather-long-name-for-a-narrow-window",
                                                  namespace="shop"))
            code, out, err = await _report(cluster, "--output=html", f"--output-file={target}")
            assert (code, out, err) == (0, "", "")

    asyncio.run(build())
    return target


def _check(browser: str, page: Path, width: int, folder: Path) -> dict[str, Any]:
    copy = folder / f"checked-{width}.html"
    copy.write_text(page.read_text().replace("</body>", CHECK + "</body>"))
    result = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
         "--hide-scrollbars", f"--window-size={width},900", f"--user-data-dir={folder / f'profile-{width}'}",
         "--virtual-time-budget=3000", "--dump-dom", copy.as_uri()],
        capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    start = result.stdout.index('<pre id="check"')
    text = result.stdout[result.stdout.index(">", start) + 1:result.stdout.index("</pre>", start)]
    import html

    found: dict[str, Any] = json.loads(html.unescape(text))
    return found


def test_the_page_is_one_offline_file_with_kubectl_quantities(page: Path) -> None:
    text = page.read_text()
    assert "http://" not in text
    assert "https://" not in text
    assert "src=" not in text
    assert "<link" not in text
    assert ">500m<" in text
    assert ">256Mi<" in text
    assert ">0.5<" not in text
    assert "Deployment shop/ghost-with-a-rather-long-name-for-a-narrow-window does not exist" in text or \
        "ghost-with-a-rather-long-name-for-a-narrow-window" in text
    assert text.count('class="timeline"') == 4  # CPU and memory, for each of the two workloads with pods


def test_the_page_shows_why_a_vpa_has_no_pods(page: Path) -> None:
    text = page.read_text()
    row = text[text.index('data-vpa="ghost-with'):]
    row = row[:row.index("</tr>")]
    assert 'class="problem' in row
    assert "does not exist" in row or "not found" in row.lower()


@pytest.mark.parametrize("width", [1024, 1600])
def test_the_page_fits_sorts_filters_and_hides_columns_in_chromium(
    page: Path, tmp_path: Path, width: int
) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    found = _check(browser, page, width, tmp_path)
    for key in ("overflow", "overflowAfter"):
        assert found[key]["wide"] == [], found[key]
        assert found[key]["scrollWidth"] <= found[key]["clientWidth"], found[key]
    assert found["overflow"]["clientWidth"] <= width
    assert found["summary"] == "3 VPAs, 2 containers, 2 namespaces"
    # web gives back 600m, api misses 300m, ghost has nothing to compare ("-", before every number).
    assert found["ascending"] == ["ghost-with-a-rather-long-name-for-a-narrow-window", "api", "web"]
    assert found["descending"] == ["web", "api", "ghost-with-a-rather-long-name-for-a-narrow-window"]
    assert found["defaultOnly"] == ["api"]
    assert found["workloadsShown"] == ["api"]
    assert found["over"] == ["web"]
    assert found["under"] == ["api"]
    assert found["limitCells"] > 0
    assert found["limitCellsShown"] == 0
