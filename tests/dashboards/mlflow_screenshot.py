"""The screenshot of docs/mlflow.md: a real MLflow server with groundwatch's assessments on a few
LangChain chains' traces, captured by headless Chromium.

    GW_MLFLOW_BIN=.venv/mlflow/bin/mlflow python -m tests.dashboards.mlflow_screenshot \\
        docs/mlflow-assessments.png

(from the repository root, with the dev requirements and Debian's ``chromium``). Prints the
trace ids and MLflow's search results it checked before taking the picture.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

import groundwatch_langchain
from openinference.instrumentation.langchain import LangChainInstrumentor

import groundwatch as gw
from groundwatch.dashboards.mlflow import MLflowSink
from testkit.chromium import headless_flags

from .mlflow_server import MLflowServer, mlflow_binary
from .test_mlflow import HALLUCINATED, app_tracing, ask

GROUNDED = "Refunds are accepted within 30 days of purchase with a receipt."


def chromium_screenshot(url: str, out: Path) -> None:
    """Open the trace in MLflow's UI, dismiss its first-visit popups, open the assessments pane
    and expand the ``groundedness`` and ``hallucination`` entries (their chevrons sit where
    MLflow 3.17's layout puts them at this window size), then save the picture."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for flag in [
        *headless_flags(tempfile.mkdtemp(prefix="gw-chromium-"), "1600,1000"),
        "--hide-scrollbars",
    ]:
        options.add_argument(flag)
    driver = webdriver.Chrome(
        service=Service(executable_path=shutil.which("chromedriver") or "chromedriver"),
        options=options,
    )
    try:
        driver.get(url)
        time.sleep(8)
        for selector in (
            "button[aria-label='Close guidance']",
            "button[aria-label='Close']",  # the assistant's side panel
            "button[aria-label^='Assess trace']",  # opens the assessments pane
        ):
            for button in driver.find_elements(By.CSS_SELECTOR, selector):
                if button.is_displayed():
                    button.click()
            time.sleep(1.5)
        for x, y in ((1318, 357), (1318, 184)):  # groundedness, then hallucination above it
            element = driver.execute_script(f"return document.elementFromPoint({x}, {y})")
            driver.execute_script(
                "arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", element
            )
            time.sleep(1.5)
        driver.save_screenshot(str(out))
    finally:
        driver.quit()


def main(out: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        server = MLflowServer(mlflow_binary(), Path(folder))
        server.start()
        try:
            sink = MLflowSink(server.url, experiment="rag-support")
            provider = app_tracing(sink)
            instrumentor = LangChainInstrumentor()
            instrumentor.instrument(tracer_provider=provider)
            # The evaluation span goes to MLflow too, beside the assessments.
            monitor = gw.Monitor(
                judge=gw.LocalJudge(),
                sampler=gw.RatioSampler(1.0),
                on_result=sink,
                tracer_provider=provider,
            )
            handler = groundwatch_langchain.GroundwatchCallbackHandler(monitor, route="support")
            grounded = ask(provider, handler, GROUNDED)
            bad = ask(provider, handler, HALLUCINATED)
            assert monitor.force_flush(60_000)
            monitor.feedback(label="hallucinated", trace_id=bad)
            assert monitor.force_flush(60_000)
            instrumentor.uninstrument()
            experiment = sink.experiment_id()
            print("traces:", f"tr-{grounded:032x}", f"tr-{bad:032x}")
            print(
                "feedback.hallucination = 'hallucinated':",
                server.search(experiment, "feedback.hallucination = 'hallucinated'"),
            )
            url = f"{server.url}/#/experiments/{experiment}/traces"
            chromium_screenshot(f"{url}?selectedEvaluationId=tr-{bad:032x}", Path(out))
            monitor.shutdown(10_000)
        finally:
            server.stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
