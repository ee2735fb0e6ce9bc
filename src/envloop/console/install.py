"""Mounting the console on the API's application: its pages, its live feed and its static files
(stylesheet and scripts shipped inside the package: nothing is fetched from elsewhere).

The console sits above the API (its pages use the API's callers and event streams), so the API
never imports it: the application `el serve` runs is built here, the API and then the console."""

from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from envloop.api.app import create_app
from envloop.console import actions, compare_page, dataset_pages, job_pages, live, sample_pages, trial_pages
from envloop.services.context import Context

STATIC_DIR = Path(__file__).parent / "static"


def install_console(app: FastAPI) -> None:
    app.mount("/console/static", StaticFiles(directory=STATIC_DIR), name="console-static")
    for router in (
        job_pages.router,
        job_pages.shared,
        trial_pages.router,
        trial_pages.shared,
        actions.router,
        compare_page.router,
        dataset_pages.router,
        sample_pages.router,
        sample_pages.shared,
        live.router,
    ):
        app.include_router(router)


def api_and_console(ctx: Context) -> FastAPI:
    """The HTTP API under /v1 with the console beside it, over `ctx`'s store: what `el serve` runs."""
    app = create_app(ctx)
    install_console(app)
    return app
