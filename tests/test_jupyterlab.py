"""A teaching notebook in JupyterLab, in a real browser: headless Chromium (Debian's chromium and
chromium-driver, driven by Selenium) opens notebook 07 in a JupyterLab server of its own, runs
every cell in smoke mode, and reads the page: no error output, the figures drawn, and the
training's progress readable after the run (each epoch's line in the cell's output, no empty
stderr strip).

The notebook runs with its two training calls switched to ``progress=True`` (the notebooks pass
``progress=False``): the page shows what a user sees who trains with progress in JupyterLab.
Needs the ``browser`` tier: apt ``chromium chromium-driver``, pip ``jupyterlab ipywidgets
selenium``. A screenshot of the page after the run is left in the test's temporary folder.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = "07_regression.ipynb"
#: Where Debian's packages put the browser and its driver (PATH is searched first).
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
#: The two training calls of notebook 07, and what the test's copy runs instead.
PROGRESS_ON = {"trainer.fit(train_loader, NUM_EPOCHS, progress=False)":
               "trainer.fit(train_loader, NUM_EPOCHS, progress=True)",
               "    ctx=CTX, progress=False)": "    ctx=CTX, progress=True)"}
SERVER_START_S = 90
RUN_S = 180
STDERR = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
STDOUT = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stdout"]'

#: JupyterLab's settings for the run: every cell kept in the page (no windowing, so that all
#: outputs can be read), no news or update check (nothing is fetched from outside).
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false", "checkForUpdates": False},
}


def _missing():
    """What the test needs and this machine lacks, in words; empty when it can run."""
    missing = [f"{name} (apt install {package})" for name, path, package in (
        ("chromium", CHROMIUM, "chromium"), ("chromedriver", CHROMEDRIVER, "chromium-driver"))
        if not os.access(path, os.X_OK)]
    import importlib.util
    missing += [f"{module} (pip install {module})" for module in ("jupyterlab", "ipywidgets",
                                                                    "selenium")
                if importlib.util.find_spec(module) is None]
    return missing


pytestmark = pytest.mark.skipif(bool(_missing()), reason="JupyterLab in a browser needs "
                                + ", ".join(_missing() or ["nothing"]))


def free_port():
    """A port the OS has just given out on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def notebook_with_progress(folder):
    """Notebook 07 in ``folder``, its two training calls with ``progress=True``."""
    notebook = json.loads((ROOT / "notebooks" / NOTEBOOK).read_text(encoding="utf-8"))
    for cell in notebook["cells"]:
        cell["source"] = "".join(cell["source"])
        for old, new in PROGRESS_ON.items():
            cell["source"] = cell["source"].replace(old, new)
    code = "\n".join(cell["source"] for cell in notebook["cells"])
    assert all(new in code for new in PROGRESS_ON.values()), \
        f"{NOTEBOOK} no longer has its two training calls with progress=False"
    (folder / NOTEBOOK).write_text(json.dumps(notebook), encoding="utf-8")


@pytest.fixture
def jupyterlab(tmp_path):
    """A JupyterLab server on 127.0.0.1 with a token, serving a copy of notebook 07; its kernels
    run in smoke mode. Yields the notebook's URL; the server is always stopped."""
    root, home = tmp_path / "root", tmp_path / "home"
    root.mkdir(), home.mkdir()
    notebook_with_progress(root)
    settings = home / "lab-settings"
    for name, values in LAB_SETTINGS.items():
        path = settings / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values), encoding="utf-8")
    port, token = free_port(), os.urandom(16).hex()
    env = dict(os.environ, GLUON_BBB_SMOKE="1",
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
               JUPYTER_CONFIG_DIR=str(home / "config"), JUPYTER_DATA_DIR=str(home / "data"),
               JUPYTER_RUNTIME_DIR=str(home / "runtime"), IPYTHONDIR=str(home / "ipython"),
               JUPYTERLAB_SETTINGS_DIR=str(settings),
               JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"))
    log = (tmp_path / "jupyterlab.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
         f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
         "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
         "--LabApp.extension_manager=readonly"] + (["--allow-root"] if os.geteuid() == 0 else []),
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            assert server.poll() is None, \
                f"JupyterLab exited: {(tmp_path / 'jupyterlab.log').read_text()[-3000:]}"
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"JupyterLab did not answer in {SERVER_START_S} s"
            time.sleep(0.5)
        yield f"{base}/lab/tree/{NOTEBOOK}?token={token}&reset"
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)  # the server shuts its kernels down
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(timeout=20)
        log.close()


@pytest.fixture
def browser(tmp_path):
    """Headless Chromium through Debian's chromedriver (never Selenium Manager: no download)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1400,1800", f"--user-data-dir={tmp_path / 'chromium'}",
                     "--no-first-run", "--disable-extensions"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


#: JavaScript: the state of the open notebook, read from JupyterLab's application object.
NOTEBOOK_STATE = """
const app = window.jupyterapp;
const panel = app && app.shell.currentWidget;
if (!panel || !panel.content || !panel.sessionContext) return null;
const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
const cells = panel.content.widgets.filter(cell => cell.model.type === 'code');
return {ready: panel.context.isReady, kernel: kernel ? kernel.status : null,
        counts: cells.map(cell => cell.model.executionCount),
        errors: cells.filter(cell => cell.model.outputs.toJSON().some(
            output => output.output_type === 'error')).length};
"""
#: JavaScript: the outputs of every code cell as the notebook holds them: [output type, stream
#: name or the MIME types].
OUTPUTS = """
const cells = window.jupyterapp.shell.currentWidget.content.widgets.filter(
    cell => cell.model.type === 'code');
return cells.map(cell => cell.model.outputs.toJSON().map(output => [output.output_type,
    output.name || Object.keys(output.data || {}).sort().join(' ')]));
"""
#: JavaScript: the outputs shown with a height and nothing in them (no text, image or widget).
BLANK_OUTPUTS = """
return Array.from(document.querySelectorAll('.jp-OutputArea-output')).filter(output =>
    output.offsetHeight > 0 && !output.textContent.trim()
    && !output.querySelector('img, svg, canvas, .widget-hprogress')).length;
"""
#: JavaScript: [natural width, shown width, shown height] of every image in an output.
FIGURE_SIZES = """
return Array.from(document.querySelectorAll('.jp-OutputArea-output img')).map(img => [
    img.naturalWidth, img.getBoundingClientRect().width, img.getBoundingClientRect().height]);
"""
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def wait_for(driver, what, condition, timeout):
    from selenium.webdriver.support.ui import WebDriverWait
    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.5).until(lambda d: condition())
    except Exception as error:  # a TimeoutException: say what was awaited
        raise AssertionError(f"waited {timeout} s for {what}; notebook state: "
                             f"{driver.execute_script(NOTEBOOK_STATE)}") from error


def test_notebook_07_runs_in_jupyterlab_with_readable_progress(jupyterlab, browser, tmp_path):
    from selenium.webdriver.common.by import By

    start = time.monotonic()
    browser.get(jupyterlab)
    wait_for(browser, "the notebook and an idle kernel", lambda: (
        (state := browser.execute_script(NOTEBOOK_STATE)) and state["ready"]
        and state["kernel"] == "idle"), SERVER_START_S)
    browser.execute_script("window.jupyterapp.commands.execute('notebook:run-all-cells');")
    wait_for(browser, "every code cell to run (or one to fail) and the kernel to go idle",
             lambda: ((state := browser.execute_script(NOTEBOOK_STATE)) and state["kernel"] == "idle"
                      and (all(count is not None for count in state["counts"]) or state["errors"])),
             RUN_S)
    shot = tmp_path / "jupyterlab.png"  # the training cell at the top
    browser.execute_script("""
        const cell = Array.from(document.querySelectorAll('.jp-CodeCell')).find(
            cell => cell.textContent.includes('history_bbb = trainer.fit('));
        if (cell) cell.scrollIntoView({block: 'start'});""")
    browser.save_screenshot(str(shot))
    seen = f"(the page: {shot})"

    outputs = browser.execute_script(OUTPUTS)
    stderr = [element.get_attribute("textContent")
              for element in browser.find_elements(By.CSS_SELECTOR, STDERR)]
    assert not [kind for cell in outputs for kind, _ in cell if kind == "error"], \
        f"error outputs: {stderr} {seen}"
    assert not [text for text in stderr if "Traceback" in text or "Error" in text], \
        f"errors on stderr: {stderr} {seen}"
    assert not [text for text in stderr if not text.strip()], f"an empty stderr strip {seen}"

    sizes = browser.execute_script(FIGURE_SIZES)
    assert len(sizes) >= 2 and all(min(size) > 0 for size in sizes), f"figures {sizes} {seen}"
    assert browser.execute_script(BLANK_OUTPUTS) == 0, f"blank outputs {seen}"
    page = browser.find_element(By.CSS_SELECTOR, ".jp-Notebook").text
    assert "Error displaying widget" not in page, seen

    # The training cell: each training call's bar was ipywidgets' (hidden when its epoch ended),
    # nothing went to stderr, and the epoch lines stay.
    training = [cell for cell in outputs if any(WIDGET_VIEW in kinds for _, kinds in cell)]
    assert len(training) == 1, f"widget bars in {len(training)} cells {seen}"
    kinds = [kind for _, kind in training[0]]
    assert sum(WIDGET_VIEW in kind for kind in kinds) == 2 and "stderr" not in kinds, (kinds, seen)
    printed = "\n".join(element.get_attribute("textContent")
                        for element in browser.find_elements(By.CSS_SELECTOR, STDOUT))
    for line in ("epoch 1/1  free energy", "epoch 1/1  loss"):  # BBB's, then the plain network's
        assert line in printed, f"no {line!r} in the output {seen}"
    epoch_lines = [element for element in browser.find_elements(By.CSS_SELECTOR, STDOUT)
                   if "epoch 1/1" in element.get_attribute("textContent")]
    assert all(line.is_displayed() and line.size["height"] > 0 for line in epoch_lines), seen
    assert time.monotonic() - start < RUN_S, seen
